"""What `launch doctor` runs on one compute node, in the suite's own Python, from the suite's
checkout (so that its starting at all says the node sees both):

    python -m launchers.commands.doctor_node OUT_FILE

It writes OUT_FILE, in the output folder, whole: the node's name, its network interfaces and
InfiniBand HCAs (what the site's NCCL_SOCKET_IFNAME and NCCL_IB_HCA must name). That the
submitting host then reads the file says the output folder is the same folder on both.
Standard library only.
"""
import os
import socket
import sys

from contract import records


def listing(path: str) -> list:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def facts() -> dict:
    # the interfaces of this process's network namespace (/sys/class/net is the namespace of
    # whoever mounted /sys, which on the test cluster's nodes is the host's)
    return {"host": socket.gethostname(), "interfaces": sorted(n for _, n in socket.if_nameindex()),
            "hcas": listing("/sys/class/infiniband"), "checkout": os.getcwd()}


def agrees(env: dict, interfaces: list, hcas: list) -> list:
    """What of the site's NCCL_SOCKET_IFNAME and NCCL_IB_HCA the node has not, by NCCL's own
    rules: a comma-separated list of prefixes, `=` for exact names, `^` to exclude (an
    exclusion list always agrees); an HCA may carry `:port`. [] when both agree."""
    bad = []
    for key, have in (("NCCL_SOCKET_IFNAME", interfaces), ("NCCL_IB_HCA", hcas)):
        value = str(env.get(key) or "")
        if not value or value.startswith("^"):
            continue
        exact = value.startswith("=")
        wanted = [w.split(":")[0] for w in value.lstrip("=").split(",") if w]
        if not any(h == w if exact else h.startswith(w) for w in wanted for h in have):
            bad.append(f"{key}={value} names none of the node's "
                       f"{'interfaces' if key == 'NCCL_SOCKET_IFNAME' else 'HCAs'} "
                       f"({', '.join(have) or 'none'})")
    return bad


if __name__ == "__main__":
    records.write_json_atomic(sys.argv[1], facts())
