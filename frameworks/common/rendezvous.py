"""A bounded meeting of all ranks, for frameworks whose own rendezvous has no timeout.

JAX's coordination client aborts the process when its rendezvous times out,
OneFlow's retries forever, and TensorFlow's multi-worker strategy needs every
rank's address before it starts. Each of them meets here first: rank 0 listens on
MASTER_ADDR:port, the others connect (retrying until the deadline) and say their
rank, and rank 0 answers everyone with the list of addresses it saw them come
from. Past `timeout_s` every rank raises TimeoutError, so the harness writes a
record that says who was missing. The peers hang up first, so rank 0's side
leaves no TIME_WAIT on the port and a framework may bind it right after.
Standard library only: this runs in the framework's Python.
"""
import json
import socket
import time


def _recv_line(conn) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("rendezvous: the peer closed the connection")
        buf += chunk
    return buf


def rendezvous(dist, timeout_s: float, port: int | None = None) -> list:
    """Every rank's address as rank 0 sees it (rank 0's own is MASTER_ADDR)."""
    port = dist.master_port if port is None else port
    where = f"{dist.master_addr}:{port}"
    deadline = time.monotonic() + timeout_s

    def left(what):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"rendezvous: {what} within {timeout_s:g} s on {where}")
        return remaining

    if dist.rank == 0:
        hosts, conns = {0: dist.master_addr}, []
        with socket.create_server(("", port)) as server:
            try:
                while len(hosts) < dist.world_size:
                    missing = sorted(set(range(dist.world_size)) - set(hosts))
                    server.settimeout(min(1.0, left(f"ranks {missing} did not arrive")))
                    try:
                        conn, (addr, _) = server.accept()
                    except socket.timeout:
                        continue
                    conns.append(conn)
                    conn.settimeout(left("a rank connected but did not say which"))
                    hosts[int(_recv_line(conn))] = addr
                listing = [hosts[r] for r in range(dist.world_size)]
                for conn in conns:
                    conn.sendall((json.dumps(listing) + "\n").encode())
                for conn in conns:  # wait for each peer to hang up first
                    conn.settimeout(left("a rank did not hang up"))
                    conn.recv(1)
            finally:
                for conn in conns:
                    conn.close()
        return listing
    while True:
        remaining = left("rank 0 not reached")  # a TimeoutError is an OSError: outside the try
        try:
            conn = socket.create_connection((dist.master_addr, port), timeout=min(5.0, remaining))
            break
        except OSError:
            time.sleep(0.2)
    with conn:
        conn.sendall(f"{dist.rank}\n".encode())
        conn.settimeout(left("not all ranks arrived"))
        try:
            return json.loads(_recv_line(conn))
        except socket.timeout:
            left("not all ranks arrived")
            raise
