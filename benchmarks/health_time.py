"""How long `python -m launch health` takes on the test cluster's 3 nodes, and where the
time goes: submission and queue, the health step (ranks start, checks, links), the verdict.
It needs the suite's test cluster (tests/slurm_cluster, `make slurm-up`), up and named by
SLURM_CONF; --throttle runs that cluster's own `throttle` command, never imports the tests.

    eval "$(.venv/bin/python -m tests.slurm_cluster env)"     # the shared test cluster
    .venv/bin/python benchmarks/health_time.py [--runs 5] [-- extra overrides]

    # a node's port throttled both ways: on a cluster of your own, never the shared one
    .venv/bin/python -m tests.slurm_cluster up --dir /tmp/dlbench-slurm-bench --second
    eval "$(.venv/bin/python -m tests.slurm_cluster env --dir /tmp/dlbench-slurm-bench)"
    .venv/bin/python benchmarks/health_time.py --throttle node3=40mbit [-- overrides]
    .venv/bin/python -m tests.slurm_cluster down --dir /tmp/dlbench-slurm-bench

Each run is `python -m launch health nodes=3 gpus_per_node=2 launcher=slurm cluster=localtest`
(every check, the default link_mb, link_cap_s and min_fraction, plus the extra overrides) as
a subprocess: its wall time; from its folder, the health step's (the first rank's start to
the last rank's end, from the records). `--throttle NODE=RATE` rate-limits the node's port
both ways (tc on both ends of its veth) for the runs and lifts it after, whatever happened.
Prints a Markdown table (benchmarks/health_time.md keeps one).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from contract import paths  # noqa: E402

BASE = ["nodes=3", "gpus_per_node=2", "launcher=slurm", "cluster=localtest"]


def one(extra: list, out_root: str) -> dict:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "launch", "health", *BASE, f"output_root={out_root}", *extra],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    (run,) = [d for d in os.listdir(out_root) if d.startswith(paths.HEALTH_RUN_PREFIX)]
    folder = os.path.join(out_root, run)
    recs = []
    for name in sorted(os.listdir(folder)):
        if paths.RANK_RECORD_RE.match(name):
            with open(os.path.join(folder, name)) as f:
                recs.append(json.load(f))
    with open(os.path.join(folder, paths.HEALTH_FILE)) as f:
        verdict = json.load(f)
    step = max(r["ended_unix"] for r in recs) - min(r["started_unix"] for r in recs)
    return {"wall": wall, "step": step, "exit": r.returncode, "ok": verdict["ok"],
            "median_gbs": verdict.get("link_median_gbytes_s"),
            "reference_gbs": verdict.get("link_reference_gbytes_s"),
            "capped": sum(link.get("capped", False) for link in verdict["links"]),
            "sick": [f"{n}: {'; '.join(w)}" for n, w in sorted(verdict["sick"].items())]
            + [f"slow link {link['src']} -> {link['dst']} {link['gbytes_s']:.2f} GB/s"
               for link in verdict["slow_links"]],
            "slow_links": len(verdict["slow_links"])}


def throttle(command: str, node: str) -> None:
    """The test cluster's own command (`python -m tests.slurm_cluster throttle NODE=RATE`,
    `unthrottle NODE`) on the cluster SLURM_CONF points at: a process, not an import, so
    that no script imports the tests."""
    where = os.path.dirname(os.path.dirname(os.environ.get("SLURM_CONF", "")))
    done = subprocess.run([sys.executable, "-m", "tests.slurm_cluster", command, node, "--dir", where],
                          cwd=ROOT, check=False)
    if done.returncode:
        sys.exit(f"error: --throttle: the test cluster under {where or '(no SLURM_CONF)'} "
                 f"could not {command} {node}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--throttle", metavar="NODE=RATE",
                        help="rate-limit NODE's port both ways for the runs (tc), e.g. node3=40mbit")
    parser.add_argument("extra", nargs="*", help="more overrides, e.g. health.link_mb=8")
    args = parser.parse_args(argv)
    if args.throttle:
        throttle("throttle", args.throttle)
    rows = []
    try:
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as out:
                rows.append(one(args.extra, out))
    finally:
        if args.throttle:
            throttle("unthrottle", args.throttle.partition("=")[0])
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M %Z')}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"command: python -m launch health {' '.join(BASE + args.extra)}"
          + (f" (throttled: {args.throttle} both ways)" if args.throttle else "") + "\n")
    print("| run | wall (s) | health step (s) | exit | verdict | links capped | link median "
          "(GB/s) | reference (GB/s) |")
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        verdict = "ok" if r["ok"] else "; ".join(r["sick"])
        print(f"| {i} | {r['wall']:.1f} | {r['step']:.1f} | {r['exit']} | {verdict} | {r['capped']} | "
              f"{r['median_gbs']:.3g} | {r['reference_gbs']:.3g} |")
    walls = [r["wall"] for r in rows]
    print(f"\nwall: median {statistics.median(walls):.1f} s, max {max(walls):.1f} s over {len(rows)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
