"""How fast the results store answers and how much it adds to a report.

    .venv/bin/python benchmarks/results_store.py [--points 10000] [--size 128x8x1000]
        [--real SWEEP] [--work DIR] [--runs 5]

1. `analysis history` over a store of --points stored points: the rows of a real smoke
   sweep's points (benchmarks/analysis_scale.py makes it), cloned into sweeps of 10 points
   each (100 configurations, a sweep a day, throughputs varied), added in one transaction;
   then `python -m analysis history --store DB` and the same with `--where
   framework=pytorch model=resnet50 --since DATE`, each as a subprocess (wall time from the
   start of the interpreter, imports included), median of --runs.
2. A sweep of --size step records (analysis_scale.generate): the default report, plots
   included, with its sweep added to a fresh SQLite store each time, against the same report
   with `--store off`, alternating, median of --runs; the difference is what adding costs
   the report. And in one process: store_rows.sweeps (what the store keeps of the loaded
   sweep) and Store.add (SQLAlchemy's import, the store made, the rows written) timed alone.

Prints the machine, the command and Markdown tables (benchmarks/results_store.md keeps them).
"""
import argparse
import copy
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.analysis_scale import generate, machine, real_sweep, report  # noqa: E402

DAY = 86400.0


def store_of(real: str, db: str, points: int) -> int:
    """A store of `points` points cloned from the real sweep's; returns how many."""
    import analysis
    from analysis.store import database as store
    from analysis.store import rows as store_rows
    base = store_rows.sweeps(analysis.load(real))[0]
    row = next(r for r in base["rows"] if r["throughput"])
    made: list[dict[str, Any]] = []
    t0 = 1_780_000_000.0
    for s in range(points // 10):
        rows = []
        for k in range(10):
            r = copy.deepcopy(row)
            config = (s * 10 + k) % 100   # 100 configurations: batch x nodes
            r.update(point=f"{k:03d}-pytorch-resnet50-fp32-bs{config}", batch_size=8 + config,
                     nodes=1 + config % 4, throughput=row["throughput"] * (1 + 0.01 * (s % 7)),
                     created_unix=t0 + s * DAY, jobs=[(f"{1000 + s}_{k}", k == 0)])
            rows.append(r)
        made.append({"key": f"sweep-{s:05d}@{t0 + s * DAY:.3f}", "name": f"sweep-{s:05d}",
                     "label": f"/data/sweeps/sweep-{s:05d}", "created_unix": t0 + s * DAY,
                     "suite_commit": "c0ffee", "points": 10, "fingerprint": str(s), "rows": rows})
    store.Store(db).add(made)
    return sum(len(m["rows"]) for m in made)


def timed(argv: list) -> tuple:
    """(wall s, CPU s, stdout) of `python -m analysis ARGV`."""
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".history-out.txt")
    t = time.perf_counter()
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "analysis", *argv], cwd=ROOT, stdout=f)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    with open(out) as f:
        text = f.read()
    os.unlink(out)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"history failed: {argv}")
    return wall, usage.ru_utime + usage.ru_stime, text


def history_part(args, real) -> None:
    db = os.path.join(args.work, "history.sqlite")
    if os.path.exists(db):
        os.unlink(db)
    n = store_of(real, db, args.points)
    print("| what | stored points | median (s) | CPU s, median | runs (s) | lines printed | "
          "load average before, after |\n|---|---|---|---|---|---|---|")
    for label, extra in (("history", []),
                         ("history --where framework=pytorch model=resnet50 --since 2026-06-01",
                          ["--where", "framework=pytorch", "model=resnet50", "--since", "2026-06-01"]),
                         ("history --where batch_size=8 nodes=1", ["--where", "batch_size=8", "nodes=1"])):
        runs, cpus, lines, before = [], [], 0, os.getloadavg()[0]
        for _ in range(args.runs):
            wall, cpu, out = timed(["history", "--store", db, *extra])
            runs.append(wall)
            cpus.append(cpu)
            lines = out.count("\n")
        print(f"| `{label}` | {n:,} | **{statistics.median(runs):.2f}** | "
              f"{statistics.median(cpus):.2f} | {' '.join(f'{r:.2f}' for r in runs)} | {lines:,} | "
              f"{before:.1f}, {os.getloadavg()[0]:.1f} |", flush=True)


def add_part(args, real) -> None:
    nodes, gpn, nsteps = (int(x) for x in args.size.split("x"))
    sweep = os.path.join(args.work, f"sweep-{args.size}")
    generate(real, sweep, nodes, gpn, nsteps)
    out = os.path.join(args.work, "report")
    os.makedirs(out, exist_ok=True)
    stores = os.path.join(args.work, "stores")
    shutil.rmtree(stores, ignore_errors=True)
    os.makedirs(stores)
    report(sweep, out, "--store", "off")   # the page cache warm
    load_before = os.getloadavg()[0]
    off, on = [], []
    for k in range(args.runs):
        off.append(report(sweep, out, "--store", "off")[:2])
        wall, cpu, _, text = report(sweep, out, "--store", os.path.join(stores, f"{k}.sqlite"))
        assert ": added " in text, text[-500:]
        on.append((wall, cpu))
    load_after = os.getloadavg()[0]
    (o, oc), (a, ac) = ((statistics.median(w for w, _ in x), statistics.median(c for _, c in x))
                        for x in (off, on))
    print(f"\n| step records | report, --store off (s) | report, adding to a new store (s) | "
          f"difference | / report | CPU s: off, adding | load average before, after |\n"
          f"|---|---|---|---|---|---|---|\n| {nodes * gpn * nsteps:,} | {o:.2f} | {a:.2f} | "
          f"{a - o:+.2f} | **{(a - o) / o:+.1%}** | {oc:.2f}, {ac:.2f} | {load_before:.1f}, "
          f"{load_after:.1f} |")
    print("\nruns (s), off / adding: " + " ".join(f"{x[0]:.2f}/{y[0]:.2f}" for x, y in zip(off, on)))
    # in one process: what the add itself costs, apart from the report
    code = ("import time, sys; t0 = time.perf_counter(); import analysis; "
            "from analysis import store_rows; r = analysis.load(sys.argv[1]); t1 = time.perf_counter(); "
            "made = store_rows.sweeps(r); t2 = time.perf_counter(); from analysis import store; "
            "t3 = time.perf_counter(); print(store.Store(sys.argv[2]).add(made)); t4 = time.perf_counter(); "
            "print(f'load {t1 - t0:.3f} s; rows {t2 - t1:.3f} s; import sqlalchemy {t3 - t2:.3f} s; '"
            "f'add {t4 - t3:.3f} s')")
    got = subprocess.run([sys.executable, "-c", code, sweep, os.path.join(stores, "alone.sqlite")],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    print("\nin one process: " + got.strip().splitlines()[-1])
    if not args.keep:
        shutil.rmtree(sweep, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=10000, help="stored points for the history")
    ap.add_argument("--size", default="128x8x1000", help="NODESxGPUSxSTEPS of the added sweep")
    ap.add_argument("--real", help="a real sweep to clone (default: run a smoke sweep)")
    ap.add_argument("--work", default="/tmp/dlbench-results-store")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the generated sweep")
    ap.add_argument("--only", choices=("history", "add"), help="one part only")
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    real = args.real or real_sweep(args.work)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {machine()}")
    print(f"# {' '.join([os.path.relpath(sys.executable, ROOT), *sys.argv])}\n")
    if args.only != "add":
        history_part(args, real)
    if args.only != "history":
        add_part(args, real)
    return 0


if __name__ == "__main__":
    sys.exit(main())
