"""The cluster's private network: a bridge with the controller's address and,
per node, a network namespace joined to it by a veth pair.

Names are machine-wide, so they all carry their instance's prefix (config.Instance:
`dlb` for the shared cluster, `dlh` for a second one beside it; never a clash with anything
else) and one cluster at a time owns each prefix (its owner file).
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from . import config

SHARED = config.SHARED


def ip(*args: str, check: bool = True) -> str:
    r = subprocess.run([config.which("ip") or "ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode:
        raise RuntimeError(f"ip {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def links() -> list[str]:
    return [line.split(":")[1].strip().split("@")[0]
            for line in ip("-o", "link", "show", check=False).splitlines() if ":" in line]


def namespaces(net: config.Instance = SHARED) -> list[str]:
    return [ns for ns in ip("netns", "list", check=False).split() if ns.startswith(f"{net.prefix}-node")]


def ns_pids(ns: str) -> set[int]:
    """Every process in a node's namespace: slurmd, slurmstepd, job tasks."""
    return {int(p) for p in ip("netns", "pids", ns, check=False).split()}


def is_mount(path: str) -> bool:
    """os.path.ismount misses a bind mount of a dir onto itself (same device)."""
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def owner(net: config.Instance = SHARED) -> str:
    try:
        return net.owner.read_text().strip()
    except OSError:
        return ""


def snapshot() -> dict:
    """What `ip netns add` may change, to undo in restore()."""
    return {"netns_dir_before": os.path.isdir("/run/netns"),
            "netns_mounted_before": is_mount("/run/netns")}


def up(dir: Path, nodes: int, net: config.Instance = SHARED) -> None:
    net.owner.write_text(str(dir))
    ip("link", "add", net.bridge, "type", "bridge")
    ip("addr", "add", f"{net.controller_addr}/24", "dev", net.bridge)
    ip("link", "set", net.bridge, "up")
    for k in range(1, nodes + 1):
        ns, veth = net.netns(k), net.veth(k)
        ip("netns", "add", ns)
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("link", "set", veth, "master", net.bridge, "up")
        ip("-n", ns, "addr", "add", f"{net.node_addr(k)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")


def down(snap: dict | None, net: config.Instance = SHARED) -> None:
    """Delete namespaces, veths and bridge (end their processes first)."""
    for link in links():
        if link.startswith(f"{net.prefix}-veth"):  # deleting one end deletes the pair
            ip("link", "del", link, check=False)
    for ns in namespaces(net):
        ip("netns", "del", ns, check=False)
    if net.bridge in links():
        ip("link", "del", net.bridge, check=False)
    end = time.monotonic() + 10  # deleted links can linger a moment
    while any(n.startswith(f"{net.prefix}-") for n in links()) and time.monotonic() < end:
        time.sleep(0.05)
    if snap:
        restore(snap)
    net.owner.unlink(missing_ok=True)


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
