"""The cluster's private network: a bridge with the controller's address and,
per node, a network namespace joined to it by a veth pair.

Names are machine-wide, so they all carry the project prefix `dlb` (never a
clash with anything else) and one cluster at a time owns them (OWNER file).
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from . import config

BRIDGE = "dlb-br0"
NETNS = "dlb-node{}"    # nodeK's network namespace, /run/netns/dlb-nodeK
VETH = "dlb-veth{}"     # root-namespace end of nodeK's veth pair; eth0 inside
OWNER = Path("/run/dlbench-slurm.owner")  # the cluster dir that owns the dlb names


def ip(*args: str, check: bool = True) -> str:
    r = subprocess.run([config.which("ip") or "ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode:
        raise RuntimeError(f"ip {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def links() -> list[str]:
    return [line.split(":")[1].strip().split("@")[0]
            for line in ip("-o", "link", "show", check=False).splitlines() if ":" in line]


def namespaces() -> list[str]:
    return [ns for ns in ip("netns", "list", check=False).split() if ns.startswith("dlb-node")]


def ns_pids(ns: str) -> set[int]:
    """Every process in a node's namespace: slurmd, slurmstepd, job tasks."""
    return {int(p) for p in ip("netns", "pids", ns, check=False).split()}


def is_mount(path: str) -> bool:
    """os.path.ismount misses a bind mount of a dir onto itself (same device)."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def owner() -> str:
    try:
        return OWNER.read_text().strip()
    except OSError:
        return ""


def snapshot() -> dict:
    """What `ip netns add` may change, to undo in restore()."""
    return {"netns_dir_before": os.path.isdir("/run/netns"),
            "netns_mounted_before": is_mount("/run/netns")}


def up(dir: Path, nodes: int) -> None:
    OWNER.write_text(str(dir))
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{config.CONTROLLER_ADDR}/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    for k in range(1, nodes + 1):
        ns, veth = NETNS.format(k), VETH.format(k)
        ip("netns", "add", ns)
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("link", "set", veth, "master", BRIDGE, "up")
        ip("-n", ns, "addr", "add", f"{config.node_addr(k)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")


def down(snap: dict | None) -> None:
    """Delete namespaces, veths and bridge (end their processes first)."""
    for link in links():
        if link.startswith("dlb-veth"):  # deleting one end deletes the pair
            ip("link", "del", link, check=False)
    for ns in namespaces():
        ip("netns", "del", ns, check=False)
    if BRIDGE in links():
        ip("link", "del", BRIDGE, check=False)
    end = time.monotonic() + 10  # deleted links can linger a moment
    while any(n.startswith("dlb-") for n in links()) and time.monotonic() < end:
        time.sleep(0.05)
    if snap:
        restore(snap)
    OWNER.unlink(missing_ok=True)


def restore(snap: dict) -> None:
    """`ip netns add` made /run/netns and bind-mounted it on itself: undo what
    we caused, once no namespace is left in it."""
    netns = Path("/run/netns")
    if not netns.is_dir() or any(netns.iterdir()):
        return
    if not snap.get("netns_mounted_before", True) and is_mount(str(netns)):
        subprocess.run(["umount", str(netns)], capture_output=True, timeout=30)
    if not snap.get("netns_dir_before", True) and not is_mount(str(netns)):
        netns.rmdir()
