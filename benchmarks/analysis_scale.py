"""How fast `python -m analysis report` is at cluster scale, against a bare json.load.

    .venv/bin/python benchmarks/analysis_scale.py [--sizes 16x8x1000,128x8x1000,512x8x1000]
        [--formats compact,indented] [--real SWEEP] [--work DIR] [--runs 3]

1. A real sweep: --real, else one made here with
   `python -m launch preset=smoke repeats=1 gpus_per_node=1 hydra.run.dir=WORK/real`.
2. For each size NODESxGPUSxSTEPS and record format, a sweep in the documented layout
   (contract/paths.py) cloned from it: its point.json, spec.json and run.json, and its rank
   record scaled to NODES x GPUS ranks of STEPS steps each (its own warm-up steps, then timed
   steps whose durations cycle the real ones, each rank a little slower than the one before
   it), written as the worker writes records (json, indent=1: `indented`) or without any
   whitespace (`compact`). The expected throughput is computed here.
3. Timed side by side, alternating, --runs rounds: (a) a bare `json.load` of every record
   file the analysis reads (point.json, run.json, rank-*.json), in this process; (b) the
   default `python -m analysis report SWEEP` (plots and report.html included) and (c) the
   same with `--no-plot`, each as a subprocess, wall time, with its CPU time (user + system,
   its second processes included) and peak memory (wait4's rusage: the largest of its
   processes). The bare parse's CPU time is this process's. The report's throughput is
   checked against the expected one. The load average before and after says how shared the
   machine was.

Prints the machine, the command and a Markdown table (benchmarks/analysis_scale.md keeps one):
each figure the median of the rounds, with their least and most, and each ratio the median
of the rounds' own ratios (a round's report over the same round's bare parse).
"""
import argparse
import copy
import glob
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from contract import paths  # noqa: E402

STEP = ('  {\n   "step": %d,\n   "phase": "%s",\n   "start": %r,\n   "end": %r,\n'
        '   "samples": %d,\n   "loss": %s\n  }')
COMPACT_STEP = '{"step":%d,"phase":"%s","start":%r,"end":%r,"samples":%d,"loss":%s}'
# how a record's JSON is laid out: as the worker writes it (json.dump, indent=1), or compact
# (no whitespace at all)
FORMATS: dict[str, dict[str, Any]] = {"indented": {"indent": 1}, "compact": {"separators": (",", ":")}}


def real_sweep(work: str) -> str:
    out = os.path.join(work, "real")
    if not glob.glob(os.path.join(out, paths.POINTS_DIR, "*", paths.POINT_FILE)):
        subprocess.run([sys.executable, "-m", "launch", "preset=smoke", "repeats=1",
                        "gpus_per_node=1", f"hydra.run.dir={out}"], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    return out


def _read(path) -> dict:
    with open(path) as f:
        return json.load(f)


def steps_text(steps, layout: str = "indented") -> str:
    """A list of step dicts exactly as json.dumps(record, **FORMATS[layout]) writes it in a
    record."""
    step, sep, ends = ((STEP, ",\n", ("[\n", "\n ]")) if layout == "indented"
                       else (COMPACT_STEP, ",", ("[", "]")))
    return ends[0] + sep.join(step % (s["step"], s["phase"], s["start"], s["end"], s["samples"],
                                      "null" if s["loss"] is None else repr(s["loss"]))
                              for s in steps) + ends[1]


def generate(real: str, out: str, nodes: int, gpn: int, nsteps: int, layout: str = "indented") -> dict:
    """A sweep of one point, nodes x gpn ranks x nsteps steps, cloned from the real sweep's
    first point, its JSON laid out as FORMATS[layout]; returns {throughput, files, bytes} of
    what it wrote."""
    fmt = FORMATS[layout]
    pfile = sorted(glob.glob(os.path.join(real, paths.POINTS_DIR, "*", paths.POINT_FILE)))[0]
    rdir0 = paths.repeat_dir(os.path.dirname(pfile), 0)
    point, run = _read(pfile), _read(os.path.join(rdir0, paths.RUN_FILE))
    rec0 = _read(os.path.join(rdir0, paths.rank_record_name(0)))
    spec_file = os.path.join(rdir0, paths.SPEC_FILE)
    spec = _read(spec_file) if os.path.exists(spec_file) else dict(rec0.get("spec") or {})
    warm = [s for s in rec0["steps"] if s["phase"] == "warmup"]
    meas = [s for s in rec0["steps"] if s["phase"] == "measure"]
    durations, losses = [s["end"] - s["start"] for s in meas], [s["loss"] for s in meas]
    world, measure, batch = nodes * gpn, nsteps - len(warm), point["batch_size"]
    assert measure > 0, f"{nsteps} steps leave none after {len(warm)} warm-up steps"

    name = f"000-{point['framework']['name']}-{point['model']['name']}-{point['precision']}-" \
           f"{nodes}x{gpn}-bs{batch}"
    shutil.rmtree(out, ignore_errors=True)
    pdir = paths.point_dir(out, name)
    rdir = paths.repeat_dir(pdir, 0)
    os.makedirs(rdir)
    point.update(point=name, dir=os.path.abspath(pdir), nodes=nodes, gpus_per_node=gpn,
                 world_size=world, measure_steps=measure, repeats=1)
    point.setdefault("config", {}).update(nodes=nodes, gpus_per_node=gpn, measure_steps=measure,
                                          repeats=1)
    spec.update(point=name, measure_steps=measure, record_dir=os.path.abspath(rdir),
                config=point["config"])
    run.update(point=name, world_size=world, exit_codes=[0] * world)
    written = 0
    for path, obj in ((os.path.join(pdir, paths.POINT_FILE), point),
                      (os.path.join(rdir, paths.SPEC_FILE), spec),
                      (os.path.join(rdir, paths.RUN_FILE), run)):
        with open(path, "w") as f:
            written += f.write(json.dumps(obj, **fmt))

    longest = 0.0
    for rank in range(world):
        host = f"node{rank // gpn:04d}"
        rec = copy.deepcopy({k: v for k, v in rec0.items() if k != "steps"})
        rec.update(point=name, rank=rank, world_size=world, local_rank=rank % gpn,
                   local_world_size=gpn, host=host, spec=spec)
        rec["environment"]["host"] = host
        if rank % gpn:
            rec["environment"]["gpu_topology"] = None  # local rank 0 only (environment.capture)
        slow = 1 + 0.001 * (rank % 7)
        steps = [dict(s) for s in warm]
        t = warm[-1]["end"] if warm else 0.0
        first = t + 1e-6
        for i in range(measure):
            start = t + 1e-6
            t = start + durations[i % len(durations)] * slow
            steps.append({"step": len(warm) + i, "phase": "measure", "start": start, "end": t,
                          "samples": batch, "loss": losses[i % len(losses)]})
        rec["window"] = {"start": first - 5e-6, "end": t + 5e-6}
        longest = max(longest, rec["window"]["end"] - rec["window"]["start"])
        rec["steps"] = "@STEPS@"
        text = json.dumps(rec, **fmt).replace('"@STEPS@"', steps_text(steps, layout))
        if rank == 0:  # the template writes what json.dumps would
            assert text == json.dumps(dict(rec, steps=steps), **fmt)
        with open(os.path.join(rdir, paths.rank_record_name(rank)), "w") as f:
            written += f.write(text)
        open(os.path.join(rdir, paths.rank_log_name(rank)), "w").close()
    return {"throughput": world * measure * batch / longest, "files": world + 2, "bytes": written,
            "steps": world * nsteps, "point": name}


def record_files(sweep: str) -> list:
    out = []
    for pfile in paths.point_files(sweep):
        out.append(pfile)
        pdir = os.path.dirname(pfile)
        for rname in sorted(n for n in os.listdir(pdir) if paths.REPEAT_RE.match(n)):
            rdir = os.path.join(pdir, rname)
            out += [os.path.join(rdir, n) for n in sorted(os.listdir(rdir))
                    if paths.RANK_RECORD_RE.match(n) or n == paths.RUN_FILE]
    return out


def bare_load(files):
    """(wall s, CPU s) of a json.load of every file."""
    t, cpu = time.perf_counter(), time.process_time()
    for path in files:
        with open(path) as f:
            json.load(f)
    return time.perf_counter() - t, time.process_time() - cpu


def report(sweep: str, out: str, *options):
    """(wall s, CPU s, peak RSS in MiB, stdout) of `python -m analysis report SWEEP [options]`:
    the CPU time of it and its second processes, the peak RSS of the largest of them."""
    t = time.perf_counter()
    with open(os.path.join(out, "stdout.txt"), "w") as so:
        proc = subprocess.Popen([sys.executable, "-m", "analysis", "report", sweep, *options,
                                 "--out", out], cwd=ROOT, stdout=so, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = open(os.path.join(out, "stdout.txt")).read()
    if proc.returncode != 0:
        raise SystemExit(f"report exited {proc.returncode}:\n{text[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text


def machine() -> str:
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in
                   subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                   if line.startswith("Model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def running() -> int:
    """Processes running or runnable now, this one included (/proc/loadavg's fourth field)."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 1


def wait_quiet(limit_s: float) -> None:
    """Until no other process has run for half a second (or `limit_s` has passed)."""
    end, quiet = time.monotonic() + limit_s, 0
    while time.monotonic() < end and quiet < 5:
        quiet = quiet + 1 if running() <= 1 else 0
        time.sleep(0.1)


def _spread(values, fmt="{:.2f}") -> str:
    """median (min-max)"""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="16x8x1000,128x8x1000,512x8x1000",
                    help="NODESxGPUSxSTEPS, comma-separated")
    ap.add_argument("--formats", default="compact,indented",
                    help="how records are laid out, comma-separated: " + ", ".join(FORMATS))
    ap.add_argument("--real", help="a real sweep to clone (default: run a smoke sweep)")
    ap.add_argument("--work", default="/tmp/dlbench-analysis-scale")
    ap.add_argument("--runs", type=int, default=3, help="rounds per size and format (median)")
    ap.add_argument("--keep", action="store_true", help="keep the generated sweeps")
    ap.add_argument("--quiet-wait", type=float, default=0,
                    help="before each round, wait up to this many seconds for a moment when no "
                         "other process runs (a shared machine)")
    args = ap.parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    # the reports add their sweeps to a results store of the work folder's, not the user's
    os.environ.setdefault("DLBENCH_STORE", os.path.join(args.work, "results.sqlite"))
    real = args.real or real_sweep(args.work)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {machine()}")
    print(f"# {' '.join([os.path.relpath(sys.executable, ROOT), *sys.argv])}\n")
    print("Each round: a bare json.load, the report, the report --no-plot, one after another; "
          "medians (min-max) of the rounds, and of each round's own ratio.\n")
    print("| ranks x steps | step records | JSON | bare json.load (s) | report (s) | "
          "report / json.load | --no-plot (s) | --no-plot / json.load | CPU s: json.load, "
          "report, --no-plot | report peak RSS (MiB) | bytes a step record | load average "
          "before, after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        nodes, gpn, nsteps = (int(x) for x in size.split("x"))
        for layout in args.formats.split(","):
            sweep = os.path.join(args.work, f"sweep-{layout}-{size}")
            g = generate(real, sweep, nodes, gpn, nsteps, layout)
            files = record_files(sweep)
            out = os.path.join(args.work, f"report-{layout}-{size}")
            os.makedirs(out, exist_ok=True)
            bare_load(files)  # the page cache warm for both
            load_before = os.getloadavg()[0]
            bare, rep, table, rss = [], [], [], []
            for _ in range(args.runs):
                wait_quiet(args.quiet_wait)
                bare.append(bare_load(files))
                wall, cpu, peak, text = report(sweep, out)
                assert "plot: " in text and "page: " in text, text[-2000:]   # plots drawn
                rep.append((wall, cpu))
                rss.append(peak)
                table.append(report(sweep, out, "--no-plot")[:2])
            load_after = os.getloadavg()[0]
            import pandas as pd
            got = pd.read_csv(os.path.join(out, "points.csv")).throughput.iloc[0]
            assert abs(got - g["throughput"]) <= 1e-9 * g["throughput"], (got, g["throughput"])
            walls = {name: [w for w, _ in x] for name, x in (("bare", bare), ("rep", rep), ("table", table))}
            cpus = [statistics.median(c for _, c in x) for x in (bare, rep, table)]
            ratio = [r / b for r, b in zip(walls["rep"], walls["bare"])]
            ratio_np = [r / b for r, b in zip(walls["table"], walls["bare"])]
            print(f"| {nodes}x{gpn} x {nsteps}, {layout} | {g['steps']:,} | {g['bytes'] / 1e6:.0f} MB "
                  f"in {len(files):,} files | {_spread(walls['bare'])} | {_spread(walls['rep'])} | "
                  f"**{_spread(ratio)}** | {_spread(walls['table'])} | {_spread(ratio_np)} | "
                  f"{', '.join(f'{c:.2f}' for c in cpus)} | {max(rss):.0f} | "
                  f"{max(rss) * 2**20 / g['steps']:.0f} | {load_before:.1f}, {load_after:.1f} |",
                  flush=True)
            if not args.keep:
                shutil.rmtree(sweep, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
