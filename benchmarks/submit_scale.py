"""How long a 100-point Slurm sweep takes to queue, against a bare loop of 100 sbatch calls.

    eval "$(.venv/bin/python -m tests.slurm_cluster env)"     # a cluster that answers
    .venv/bin/python benchmarks/submit_scale.py [--points 100] [--runs 3] [--baseline]

Side by side, alternating, median of --runs, on the cluster SLURM_CONF points at:

1. bare loop: N x `sbatch --hold --parsable --output=/dev/null --wrap=true` (one process
   each, as a shell loop would), and one N-task held job array (`--array=0-(N-1)`);
2. the suite: `python -m launch -m launcher=slurm cluster=localtest preset=smoke
   seed=range(N) +cluster.sbatch_args={hold:true} hydra.sweep.dir=TMP` as a subprocess,
   wall time from start to exit (interpreter, Hydra, every point composed, checked and
   written, sbatch); every point's slurm.json is checked to name a queued task;
3. the same sweep with dry_run=true (no hold needed: nothing is submitted);
4. with --baseline, once: the sweep through Hydra's own basic sweeper and launcher
   (`hydra/sweeper=basic hydra/launcher=basic`: every job composed twice, one sbatch and
   one git lookup per point), as before the suite's plugin.

Every job it queues is held, then cancelled with `scancel` and an argument list of job ids.
Prints the machine, the command and a Markdown table (benchmarks/submit_scale.md keeps one).
"""
import argparse
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from contract import paths  # noqa: E402


def sbatch_loop(n: int) -> tuple:
    """(seconds, job ids) of n bare held sbatch calls."""
    t0 = time.perf_counter()
    ids = [subprocess.run(["sbatch", "--hold", "--parsable", "--output=/dev/null", "--wrap=true"],
                          capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
           for _ in range(n)]
    return time.perf_counter() - t0, ids


def sbatch_array(n: int) -> tuple:
    t0 = time.perf_counter()
    out = subprocess.run(["sbatch", "--hold", "--parsable", "--output=/dev/null",
                          f"--array=0-{n - 1}", "--wrap=true"], capture_output=True, text=True,
                         check=True).stdout.strip().split(";")[0]
    return time.perf_counter() - t0, [out]


def sweep(n: int, work: str, *extra) -> tuple:
    """(seconds, job ids from the points' slurm.json) of `python -m launch -m ...`."""
    folder = tempfile.mkdtemp(dir=work)
    argv = [sys.executable, "-m", "launch", "-m", "launcher=slurm", "cluster=localtest",
            "preset=smoke", f"seed=range({n})", f"hydra.sweep.dir={folder}", *extra]
    t0 = time.perf_counter()
    res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"launch failed: {res.stderr[-2000:]}")
    ids = []
    for path in glob.glob(os.path.join(paths.point_dir(folder, "*"), paths.SLURM_FILE)):
        with open(path) as f:
            ids.append(json.load(f)["job_id"])
    shutil.rmtree(folder, ignore_errors=True)
    return took, ids


def check_queued(ids: list, n: int) -> None:
    """Every id names a held task the controller has (one squeue call)."""
    bases = sorted({i.split("_")[0] for i in ids})
    out = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(bases), "-o", "%i %r"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    held = {line.split()[0] for line in out if line.endswith("JobHeldUser")}
    if len(ids) != n or not set(ids) <= held:
        raise SystemExit(f"{n} points, {len(ids)} job ids, {len(set(ids) - held)} not queued and held")


def cancel(ids: list) -> None:
    if ids:
        subprocess.run(["scancel", *ids], check=True)


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), platform.processor())
    return (f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", action="store_true",
                    help="also once through Hydra's basic sweeper and launcher (slow)")
    ap.add_argument("--work", default=None, help="where the sweeps go (default: a temp folder)")
    args = ap.parse_args(argv)
    if shutil.which("sbatch") is None or subprocess.run(["scontrol", "ping"],
                                                        capture_output=True).returncode != 0:
        print("error: no Slurm controller answers (eval \"$(.venv/bin/python -m tests.slurm_cluster "
              "env)\" first)", file=sys.stderr)
        return 2
    n, work = args.points, args.work or tempfile.mkdtemp(prefix="submit_scale-")
    os.makedirs(work, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}")
    print(f"# {' '.join([os.path.relpath(sys.executable, ROOT), 'benchmarks/submit_scale.py', *sys.argv[1:]])}")
    times: dict[str, list[float]] = {k: [] for k in ("loop", "array", "suite", "dry")}
    for _ in range(args.runs):
        for key, run in (("loop", lambda: sbatch_loop(n)), ("array", lambda: sbatch_array(n)),
                         ("suite", lambda: sweep(n, work, "+cluster.sbatch_args={hold:true}")),
                         ("dry", lambda: sweep(n, work, "dry_run=true"))):
            took, ids = run()
            try:
                if key == "suite":
                    check_queued(ids, n)
            finally:
                cancel(ids)
            times[key].append(took)
    if args.baseline:
        took, ids = sweep(n, work, "+cluster.sbatch_args={hold:true}", "hydra/sweeper=basic",
                          "hydra/launcher=basic")
        try:
            check_queued(ids, n)
        finally:
            cancel(ids)
        times["basic"] = [took]
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n| what ({n} points) | seconds (median of {args.runs}) | / bare sbatch loop |\n|---|---|---|")
    rows = [("bare loop of sbatch --hold", "loop"), ("one held job array, one sbatch", "array"),
            ("`python -m launch -m ...` held (job arrays)", "suite"),
            ("the same, dry_run=true", "dry")]
    if args.baseline:
        rows.append(("the same through Hydra's basic sweeper + launcher (once)", "basic"))
    for label, key in rows:
        print(f"| {label} | {med[key]:.2f} | {med[key] / med['loop']:.2f} |")
    print("\nall runs: " + "; ".join(f"{k} {', '.join(f'{t:.2f}' for t in v)}" for k, v in times.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
