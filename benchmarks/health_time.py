"""How long `python -m launch health` takes on the test cluster's 3 nodes, and where the
time goes: submission and queue, the health step (ranks start, checks, links), the verdict.

    eval "$(.venv/bin/python -m tests.slurm_cluster env)"     # the shared test cluster
    .venv/bin/python benchmarks/health_time.py [--runs 5] [-- extra overrides]

Each run is `python -m launch health nodes=3 gpus_per_node=2 launcher=slurm cluster=localtest`
(every check, the default link_mb and min_fraction, plus the extra overrides) as a
subprocess: its wall time; from its folder, the health step's (the first rank's start to the
last rank's end, from the records) and the links' share (the slowest node leader's link
rounds). Prints a Markdown table (benchmarks/health_time.md keeps one).
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
            "sick": [f"{n}: {'; '.join(w)}" for n, w in sorted(verdict["sick"].items())]
            + [f"slow link {l['src']} -> {l['dst']} {l['gbytes_s']:.2f} GB/s" for l in verdict["slow_links"]],
            "slow_links": len(verdict["slow_links"])}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("extra", nargs="*", help="more overrides, e.g. health.link_mb=8")
    args = parser.parse_args(argv)
    rows = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as out:
            rows.append(one(args.extra, out))
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"command: python -m launch health {' '.join(BASE + args.extra)}\n")
    print("| run | wall (s) | health step (s) | exit | verdict | link median (GB/s) |")
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(rows, 1):
        verdict = "ok" if r["ok"] else "; ".join(r["sick"])
        print(f"| {i} | {r['wall']:.1f} | {r['step']:.1f} | {r['exit']} | {verdict} | "
              f"{r['median_gbs']:.2f} |")
    walls = [r["wall"] for r in rows]
    print(f"\nwall: median {statistics.median(walls):.1f} s, max {max(walls):.1f} s over {len(rows)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
