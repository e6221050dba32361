"""How fast `python -m launch status SWEEP` answers for a 1,000-point Slurm sweep, and how
many times it asks Slurm.

    eval "$(.venv/bin/python -m tests.slurm_cluster env)"     # a cluster that answers
    .venv/bin/python benchmarks/status_scale.py [--points 1000] [--runs 3] [--work DIR]

1. One real point composed by Hydra (`launcher=slurm cluster=localtest preset=smoke`,
   2 repeats) and written N times, renamed, in the layout's sweep folder
   (contract/paths.py): a quarter with both repeats recorded (run.json), a
   quarter with one recorded and the second's folder begun, half with nothing yet.
2. Each point's slurm.json names a REAL job, as the launcher writes it, in three sweeps:
   - plain: N held jobs (`sbatch --hold --wrap=true`, one each), ids like `123`;
   - array: one held N-task job array (`sbatch --hold --array=0-(N-1)`), ids like `123_4`;
   - then both are cancelled and, past the controller's MinJobAge, only accounting knows
     them (`finished`): the sweep of a week ago.
   Also `fake`: ids Slurm never issued (neither squeue nor sacct knows them).
3. For each: `python -m launch status SWEEP` as a subprocess, wall time, median of --runs;
   and once with `squeue` and `sacct` on PATH as wrappers that log each call and exec the
   real one: how many calls it made. Beside them, the floor: `python -c "import launch"`
   (the interpreter and launch.py's imports, Hydra's included), the same way.

Every job it submits is held and cancelled at the end. Prints a Markdown table
(benchmarks/status_scale.md keeps one).
"""
import argparse
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

from contract import paths, records  # noqa: E402  (after sys.path reaches the checkout)

WRAPPER = '#!/bin/sh\necho "$0 $*" >> "{log}"\nexec {real} "$@"\n'


def one_point(work: str) -> dict:
    """A point as `python -m launch` makes it for the local test cluster."""
    from hydra import compose, initialize_config_dir
    from launchers.plan import points
    with initialize_config_dir(config_dir=os.path.join(ROOT, "conf"), version_base=None):
        cfg = compose("config", overrides=["launcher=slurm", "cluster=localtest", "preset=smoke"])
    return points.make_point(cfg, work, 0).as_dict()  # as point.json holds it


def write_sweep(sweep: str, base: dict, job_ids: list) -> None:
    for i, job in enumerate(job_ids):
        name = f"{i:04d}-pytorch-resnet50-fp32-1x1-bs4-seed{i}"
        pdir = paths.point_dir(sweep, name)
        os.makedirs(pdir)
        point = dict(base, point=name, num=i, dir=pdir)
        records.write_json_atomic(os.path.join(pdir, paths.POINT_FILE), point)
        records.write_json_atomic(os.path.join(pdir, paths.SLURM_FILE), {
            "schema": paths.SLURM_SCHEMA, "version": paths.SCHEMA_VERSION, "point": name,
            "job_id": job, "submitit_folder": os.path.join(pdir, "slurm"),
            "log": os.path.join(pdir, "slurm", f"{job}_0_log.out"),
            "submitted_unix": time.time(), "time_min": 15, "previous_jobs": []})
        recorded = 2 if i % 4 == 0 else 1 if i % 4 == 1 else 0
        for r in range(recorded):
            rdir = paths.repeat_dir(pdir, r)
            os.makedirs(rdir)
            records.write_json_atomic(os.path.join(rdir, paths.RUN_FILE), {
                "schema": paths.RUN_SCHEMA, "version": paths.SCHEMA_VERSION, "point": name,
                "repeat": r, "status": "ok", "error": None, "world_size": 1})
        if recorded == 1:
            os.makedirs(paths.repeat_dir(pdir, 1))


def sbatch(*args) -> str:
    out = subprocess.run(["sbatch", "--parsable", "--hold", "--job-name=dlbench-status-scale",
                          "--output=/dev/null", *args, "--wrap=true"],
                         capture_output=True, text=True, check=True).stdout
    return out.strip().split(";")[0]


def time_status(sweep: str, runs: int, env=None) -> tuple:
    """(median wall seconds, the table's state counts)."""
    times, out = [], ""
    for _ in range(runs):
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "launch", "status", sweep], cwd=ROOT,
                             capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        assert res.returncode == 0, res.stderr[-2000:]
        out = res.stdout
    counts: dict = {}
    for line in out.split("\n\n")[0].splitlines()[1:]:
        state = line.split()[1]
        counts[state] = counts.get(state, 0) + 1
    return statistics.median(times), counts


def floor(runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import launch"], cwd=ROOT, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def count_calls(sweep: str, work: str) -> dict:
    """squeue and sacct calls of one status run, by PATH wrappers around the real ones."""
    wdir, log = os.path.join(work, "bin"), os.path.join(work, "calls.log")
    os.makedirs(wdir, exist_ok=True)
    for name in ("squeue", "sacct"):
        with open(os.path.join(wdir, name), "w") as f:
            f.write(WRAPPER.format(log=log, real=shutil.which(name)))
        os.chmod(os.path.join(wdir, name), 0o755)
    open(log, "w").close()
    time_status(sweep, 1, env=dict(os.environ, PATH=wdir + os.pathsep + os.environ["PATH"]))
    calls = [line.split()[0] for line in open(log)]
    return {name: sum(os.path.basename(c) == name for c in calls) for name in ("squeue", "sacct")}


def min_job_age() -> int:
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("MinJobAge"):
            return int(line.split("=")[1].split()[0])
    return 300


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=None, help="where the sweeps go (default: a temporary folder)")
    args = ap.parse_args()
    if shutil.which("sbatch") is None:
        print("error: no sbatch on PATH: point the shell at a cluster first", file=sys.stderr)
        return 2
    work = args.work or tempfile.mkdtemp(prefix="status-scale-")
    n = args.points
    base = one_point(work)
    t0 = time.perf_counter()
    plain = [sbatch() for _ in range(n)]
    plain_s = time.perf_counter() - t0
    array = sbatch(f"--array=0-{n - 1}")
    sweeps = {"plain": plain, "array": [f"{array}_{i}" for i in range(n)],
              "fake": [str(900000000 + i) for i in range(n)]}
    for name, ids in sweeps.items():
        write_sweep(os.path.join(work, name), base, ids)
    rows = []

    def row(label, name):
        sweep = os.path.join(work, name)
        rows.append((label,) + time_status(sweep, args.runs) + (count_calls(sweep, work),))

    try:
        for name in ("plain", "array"):
            row(f"{name}, queued (held)", name)
    finally:
        subprocess.run(["scancel", array, *plain], check=False)
    wait = min_job_age() + 15
    print(f"# cancelled; waiting {wait} s (MinJobAge + 15) for the controller to forget them",
          file=sys.stderr)
    time.sleep(wait)
    for name in ("plain", "array"):
        row(f"{name}, finished (accounting only)", name)
    row("fake ids (never issued)", "fake")
    base_s = floor(args.runs)

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    slurm = subprocess.run(["sinfo", "-V"], capture_output=True, text=True).stdout.strip()
    load = os.getloadavg()[0]
    print(f"Machine: {cpu}, {os.cpu_count()} cores (load average {load:.1f} at the end); "
          f"{platform.platform()}; Python {platform.python_version()}; {slurm}")
    print(f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"Command: .venv/bin/python benchmarks/status_scale.py --points {n} --runs {args.runs}")
    print(f"({n} held plain jobs submitted in {plain_s:.1f} s)\n")
    print("| sweep of %d points | status wall (s), median of %d | squeue calls | sacct calls | states |"
          % (n, args.runs))
    print("|---|---|---|---|---|")
    for label, seconds, counts, c in rows:
        states = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        print(f"| {label} | {seconds:.2f} | {c['squeue']} | {c['sacct']} | {states} |")
    print(f"| floor: `python -c \"import launch\"` | {base_s:.2f} | | | |")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
