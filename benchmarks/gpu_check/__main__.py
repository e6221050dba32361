"""python -m benchmarks.gpu_check [--device cuda|cpu] [--budget S] [--out DIR] [--tar PATH]
[--stages A,B] (the package says what it does; --stages: only those, in their order): the environment's
lines, every stage in order within the budget,
the table (printed, OUT/table.md, OUT/table.json), each sweep's report while time is left, and
one tarball (default beside OUT) of every sweep and log (no checkpoint files). Exit 0 when every stage is ok
(or skipped, or `unsupported`, with its reason), 1 otherwise, 2 when nothing could run (no CUDA device, or the
suite does not import): contract/exits.py."""
import argparse
import json
import os
import subprocess
import sys
import tarfile
import time

from benchmarks.gpu_check import environment, runner
from contract import exits

BUDGET_S = {"cuda": 480, "cpu": 360}     # one H100 or H200 within 8 minutes; the CPU rehearsal in 6
RESERVE_S = {"cuda": 40, "cpu": 10}      # the table, the reports, the tarball
REPORT_S = 25
SITE = ".site"    # in OUT: the wheels' packages, where they were needed (not in the tarball)


CONSOLE: list = []   # what `say` printed, also kept as OUT/console.txt


def say(*args, **kw):
    print(*args, **kw, flush=True)
    CONSOLE.append(" ".join(map(str, args)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check", description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole check")
    parser.add_argument("--out", default=None, help="its folder (default outputs/gpu-check-DEVICE-TIME)")
    parser.add_argument("--tar", default=None, help="the tarball of OUT (default OUT.tar.gz)")
    parser.add_argument("--stages", default=None, help="only these stages (comma-separated names)")
    args = parser.parse_args(argv)
    names = _stage_names()
    chosen = names if args.stages is None else [x.strip() for x in args.stages.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in names]
    if unknown or not chosen:
        print(f"gpu-check: --stages takes names of {', '.join(names)}; got {args.stages!r}", file=sys.stderr)
        return exits.REFUSED
    budget = runner.Budget(args.budget or BUDGET_S[args.device], RESERVE_S[args.device])
    out = os.path.abspath(args.out or os.path.join(
        environment.ROOT, "outputs", f"gpu-check-{args.device}-{time.strftime('%Y%m%d-%H%M%S')}"))
    os.makedirs(out, exist_ok=True)
    say(f"gpu-check: device {args.device}, budget {budget.seconds:.0f} s, out {out}")
    environment.install_wheels(os.path.join(out, SITE), say)
    if not environment.report(say):
        say("gpu-check: the suite does not import here: no stage can run")
        return exits.REFUSED
    import torch
    gpus = torch.cuda.device_count() if args.device == "cuda" else 2
    if args.device == "cuda" and not gpus:
        say("gpu-check: no CUDA device: nothing to check (--device cpu rehearses the check on a CPU)")
        return exits.REFUSED
    from benchmarks.gpu_check import figures
    from benchmarks.gpu_check.stages import STAGES, Context
    ctx = Context(args.device, gpus, out)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.device == "cpu":   # one thread a process: on a few shared cores two collapse (README)
        env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("DLBENCH_STORE", os.path.join(out, "results.sqlite"))   # the reports' store: in OUT
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + [environment.ROOT]))
    done: dict = {}
    for stage in (s for s in STAGES if s.name in chosen):
        ran = runner.run(stage, ctx, budget, env, say)
        done[stage.name] = figures.rows(stage, ran, ctx, done)
        for row in done[stage.name]:
            say(f"    {row.stage}: {row.status} {row.figure} {('| ' + row.note) if row.note else ''}")
    table = [row for rows in done.values() for row in rows]
    text = _table(table, args.device, budget)
    say(text)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "table.json"), "w") as f:
        json.dump({"device": args.device, "seconds": budget.elapsed(), "rows": [r.as_dict() for r in table]}, f,
                  indent=1)
    _reports(ctx, budget, env)
    with open(os.path.join(out, "console.txt"), "w") as f:
        f.write("\n".join(CONSOLE) + "\n")
    tar = _tarball(out, args.tar or out.rstrip("/") + ".tar.gz")
    say(f"gpu-check: {len(table)} rows in {budget.elapsed():.0f} s; table {os.path.join(out, 'table.md')}; "
        f"everything in {tar}")
    return exits.of(r.status for r in table)


def _stage_names() -> list:
    """The stages' names, read before anything but the standard library is imported."""
    from benchmarks.gpu_check.stages import STAGES
    return [stage.name for stage in STAGES]


def _table(table, device, budget) -> str:
    from tabulate import tabulate
    from benchmarks.gpu_check import figures
    head = (f"## gpu-check on {device}: {sum(r.status == 'ok' for r in table)} of {len(table)} ok, "
            f"{budget.elapsed():.0f} s")
    noise = figures.noise_line(table)
    return (head + "\n\n" + tabulate([r.cells() for r in table], figures.HEADERS, tablefmt="pipe")
            + (f"\n\n{noise}" if noise else ""))


def _reports(ctx, budget, env) -> None:
    """`python -m analysis report SWEEP --no-plot` of each sweep while the budget lasts."""
    from benchmarks.gpu_check.stages import STAGES
    from contract import paths
    for stage in STAGES:
        folder = os.path.join(ctx.out, stage.name)
        left = budget.seconds - budget.elapsed() - 10
        if stage.kind == "bare" or not os.path.isdir(os.path.join(folder, paths.POINTS_DIR)) or left < 5:
            continue
        with open(os.path.join(ctx.out, "logs", f"report-{stage.name}.log"), "w") as f:
            try:
                subprocess.run([sys.executable, "-m", "analysis", "report", folder, "--no-plot"], stdout=f,
                               stderr=subprocess.STDOUT, env=env, timeout=min(REPORT_S, left))
            except subprocess.TimeoutExpired:
                f.write(f"\ngpu-check: the report took more than {min(REPORT_S, left):.0f} s: stopped\n")


def _tarball(out: str, path: str) -> str:
    def keep(info):
        name = info.name
        skip = ("/checkpoints" in name or f"/{SITE}" in name or name.endswith((".distcp", ".pt")))
        return None if skip else info
    with tarfile.open(path, "w:gz") as tar:
        tar.add(out, arcname=os.path.basename(out), filter=keep)
    return path


if __name__ == "__main__":
    sys.exit(main())
