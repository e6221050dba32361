"""A real PostgreSQL server for the results store's tests, started on a temporary data folder
and a free port on 127.0.0.1, and stopped after (as tests/slurm_cluster starts Slurm).

Debian's postgresql package (`make postgres-deps`, as root: mk/postgres.mk) gives initdb and
postgres under /usr/lib/postgresql/<version>/bin. PostgreSQL refuses to run as root: as root
the server runs as the package's `postgres` user (Popen's user=), its data folder owned by it.

    python -m tests.postgres_server      starts one, prints its URL, stops it on Enter
"""
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

DATABASE = "dlbench"


def binaries():
    """The folder of initdb and postgres (the newest version installed), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    postgres = shutil.which("postgres")
    return os.path.dirname(os.path.realpath(postgres)) if postgres else None


def skip_reason():
    """Why no server can be started here, or None."""
    if binaries() is None:
        return "PostgreSQL is not installed (make postgres-deps, as root: Debian's postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and no `postgres` user to run the server as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (requirements.txt)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> dict:
    """Popen's arguments that run a command as the postgres user, when root."""
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}


@contextlib.contextmanager
def server():
    """Yields the URL (postgresql+psycopg://...) of a fresh server's empty database."""
    bindir, folder = binaries(), tempfile.mkdtemp(prefix="dlbench-pg-")
    data, port = os.path.join(folder, "data"), _free_port()
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
    proc = None
    try:
        subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--no-sync"], cwd=folder,
                       check=True, capture_output=True, timeout=120, **_as_server_user())
        proc = subprocess.Popen([os.path.join(bindir, "postgres"), "-D", data, "-p", str(port),
                                 "-h", "127.0.0.1", "-k", folder, "-c", "fsync=off"], cwd=folder,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **_as_server_user())
        import psycopg
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres",
                                     autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {DATABASE}")
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostgreSQL did not start: "
                                       + proc.stderr.read().decode(errors="replace")[-500:])
                time.sleep(0.2)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{DATABASE}"
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)   # PostgreSQL's fast shutdown: clients cut off
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    reason = skip_reason()
    if reason:
        raise SystemExit(reason)
    with server() as url:
        input(f"{url}\n(Enter stops it) ")
