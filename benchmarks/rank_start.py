"""What a local CPU point's PyTorch ranks cost to start, forked from a forkserver that imported
torch once (launcher.forkserver=true, the default; launchers/backends/forked.py) against each
rank a new interpreter (launcher.forkserver=false, as srun starts them).

    .venv/bin/python benchmarks/rank_start.py [--runs 3] [--ranks 2] [-- extra overrides]

Each run is `python -m launch framework=pytorch model=resnet50 preset=smoke repeats=2
gpus_per_node=RANKS launcher=local` as a subprocess, alternating the two settings: its wall
time and the CPU of it and everything it waited for (the launcher, the server, the ranks:
getrusage of the children). Prints a Markdown table, medians (benchmarks/rank_start.md keeps
one).
"""
import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def one(forkserver: bool, ranks: int, extra: list, out: str) -> tuple:
    """(wall s, CPU s) of one launch."""
    argv = [sys.executable, "-m", "launch", "framework=pytorch", "model=resnet50", "preset=smoke",
            "repeats=2", f"gpus_per_node={ranks}", "launcher=local", f"output_root={out}",
            f"launcher.forkserver={str(forkserver).lower()}", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, SLURM_CONF="/nonexistent"))
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"launch failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("extra", nargs="*", help="overrides for every launch")
    args = parser.parse_args()
    seen: dict = {True: [], False: []}
    with tempfile.TemporaryDirectory() as out:
        for _ in range(args.runs):
            for forkserver in (True, False):
                seen[forkserver].append(one(forkserver, args.ranks, args.extra, out))
    print(f"{platform.node()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}: a smoke "
          f"ResNet-50 point, {args.ranks} ranks x 2 repeats, medians of {args.runs}")
    print("\n| launcher.forkserver | wall | CPU (launcher, server, ranks) |\n|---|---|---|")
    for forkserver in (True, False):
        walls, cpus = zip(*seen[forkserver])
        print(f"| {str(forkserver).lower()} | {statistics.median(walls):.1f} s | "
              f"{statistics.median(cpus):.1f} s |")


if __name__ == "__main__":
    main()
