"""python -m tests.slurm_cluster up|down|status|env|throttle|unthrottle [--dir DIR]
(see docs/slurm-test-cluster.md)."""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time

from . import config
from .cluster import CLIENT_PREFIXES, ClusterError, LocalSlurmCluster, default_dir, skip_reason


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.slurm_cluster",
                                description="A local multi-node Slurm cluster for tests.")
    p.add_argument("command", choices=["up", "down", "status", "env", "throttle", "unthrottle"])
    p.add_argument("node", nargs="?", metavar="NODE[=RATE]", help="throttle: rate-limit NODE's port "
                   "both ways (tc; RATE default 40mbit); unthrottle: lift it")
    p.add_argument("--dir", default=None, help="cluster files (default: $DLBENCH_SLURM_DIR "
                   "or /tmp/dlbench-slurm)")
    p.add_argument("--nodes", type=int, default=3, help="up: number of nodes (default 3)")
    p.add_argument("--gpus-per-node", type=int, default=2, help="up: fake GPUs per node (default 2)")
    p.add_argument("--timeout", type=float, default=60, help="up: seconds to wait for idle nodes")
    p.add_argument("--second", action="store_true", help="up: the second instance (names dlh-*, "
                   "10.78.0.0/24, ports 16827-16829), beside the shared one; no accounting")
    p.add_argument("--devices", action="append", default=[], metavar="NODE=K",
                   help="up: NODE has K fake GPUs, not --gpus-per-node (repeatable)")
    a = p.parse_args(argv)
    try:
        return run(a)
    except (ClusterError, ValueError) as e:
        print(f"{a.command} failed: {e}", file=sys.stderr)
        return 1


def run(a: argparse.Namespace) -> int:
    dir = a.dir or default_dir()
    running = LocalSlurmCluster.load(dir)

    if a.command == "up":
        reason = skip_reason()
        if reason:
            print(f"cannot start a local Slurm cluster: {reason}", file=sys.stderr)
            return 2
        devices = {d.split("=")[0]: int(d.split("=")[1]) for d in a.devices}
        c = LocalSlurmCluster(dir, a.nodes, a.gpus_per_node, devices=devices,
                              **({"instance": config.SECOND, "accounting": False} if a.second else {}))
        if running and running.is_up() and not c.is_up():
            print(f"replacing the running {running}")
        t0 = time.monotonic()
        started = c.up(timeout=a.timeout)
        verb = "started" if started else "already up:"
        print(f"{verb} {c} in {time.monotonic() - t0:.1f}s; eval \"$(python -m tests.slurm_cluster "
              f"env --dir {c.dir})\" to use it")
        return 0

    if a.command == "down":
        (running or LocalSlurmCluster(dir)).down()
        print(f"down: {dir}")
        return 0

    if a.command == "status":
        if running is None or not running.is_up():
            print(f"down: no local Slurm cluster runs from {dir}")
            return 3
        print(f"up: {running} accounting={'slurmdbd' if running.accounting else 'none'}")
        r = subprocess.run(["sinfo", "-N", "-o", "%N %t %c %m %G %P"], env=running.client_env(),
                           capture_output=True, text=True, timeout=30)
        print(r.stdout + r.stderr, end="")
        return 0

    if a.command in ("throttle", "unthrottle"):
        if running is None or not running.is_up() or not a.node:
            print(f"{a.command}: needs NODE and a cluster up under {dir}", file=sys.stderr)
            return 2
        node, _, rate = a.node.partition("=")
        if a.command == "throttle":
            running.limit_rate(node, rate or "40mbit", both=True)
        else:
            running.unlimit(node)
        return 0

    # env: lines a shell can eval; also drops an outer job's variables.
    c = running or LocalSlurmCluster(dir)
    if not c.is_up():
        print(f"warning: no local Slurm cluster runs from {c.dir}", file=sys.stderr)
    for k in sorted(os.environ):
        if k.startswith(CLIENT_PREFIXES) and k != "SLURM_CONF":
            print(f"unset {shlex.quote(k)}")
    print(f"export SLURM_CONF={shlex.quote(c.env()['SLURM_CONF'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
