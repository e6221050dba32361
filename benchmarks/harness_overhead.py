"""The harness beside its bare loop, each PyTorch model with one, on this CPU at tiny sizes,
rounds alternated (benchmarks/harness_overhead.md):

    .venv/bin/python benchmarks/harness_overhead.py [--models resnet50,bert_base] [--rounds 5]
        [--batch 2] [--warmup 3] [--steps 20] [--precision fp32|amp] [--out DIR]

One sweep through `python -m launch` (model.size=tiny, one point a model, launcher=local), then
for each point the GPU check's pair (benchmarks/gpu_check/pair.py): the harness's round (the
point's rank 0, its worker entry and environment) and the bare loop's (bare.py `suite`: the
same model, batch, optimizer, dtype, steps and environment), alternated `--rounds` times.
Prints the machine, the date, the command and a table: each side's median samples/s, harness /
bare (the median of the rounds' ratios) with its min..max, and whether that spread includes
1.0 (benchmarks/gpu_check/ratio.py). OMP_NUM_THREADS is 1 unless set (two threads on a few
shared cores measure the neighbours). The models: those of the plain data-parallel session
(frameworks/pytorch/session.py's TorchSession), the ones bare.py builds; any other name gets
one line and exit 2.
"""
import argparse
import datetime
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from contract import models  # noqa: E402
from contract import paths  # noqa: E402


def bare_models() -> tuple:
    """The PyTorch models of TorchSession, the plain data-parallel session (bare.py's `suite`
    loop builds them), as their modules declare (frameworks/pytorch/models/<name>.py)."""
    from frameworks.pytorch.session import TorchSession
    from frameworks.registry import resolve
    return models.named(lambda s: s.pytorch_session is not None and not s.layouts
                        and resolve(s.pytorch_session) is TorchSession)


def machine() -> str:
    """lscpu's model name and CPUs, one line."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return f"{os.cpu_count()} CPUs"
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} CPUs"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=None, help="comma-separated (default: every model with a bare loop)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--precision", choices=("fp32", "amp"), default="fp32")
    p.add_argument("--out", default=None, help="its folder (default: a temporary one)")
    args = p.parse_args(argv)
    chosen = [m.strip() for m in (args.models or "").split(",") if m.strip()]
    if any(m not in models.names() for m in chosen):   # said before torch's import
        print(f"harness_overhead: unknown model {', '.join(m for m in chosen if m not in models.names())} "
              f"(the models: {', '.join(models.names())})", file=sys.stderr)
        return 2
    known = bare_models()
    chosen = chosen or list(known)
    unknown = [m for m in chosen if m not in known]
    if unknown or not chosen or min(args.rounds, args.batch, args.steps) < 1 or args.warmup < 0:
        print(f"harness_overhead: no bare loop for {', '.join(unknown) or repr(args.models)} (the models with "
              f"one: {', '.join(known)})"
              if unknown or not chosen else "harness_overhead: --rounds, --batch and --steps must be at least 1",
              file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = args.out or tempfile.mkdtemp(prefix="dlbench-harness-overhead-")
    sweep = os.path.join(out, "sweep")
    cmd = [sys.executable, "-m", "launch", "-m", f"model={','.join(chosen)}", "model.size=tiny",
           f"precision={args.precision}", f"batch_size={args.batch}", f"warmup_steps={args.warmup}",
           f"measure_steps={args.steps}", "device=cpu", "launcher=local", "repeats=1", f"hydra.sweep.dir={sweep}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"harness_overhead: the sweep failed (rc {done.returncode}): {(done.stdout + done.stderr)[-2000:]}",
              file=sys.stderr)
        return 1
    from benchmarks.gpu_check import pair
    from benchmarks.gpu_check.ratio import spread
    import statistics
    rows = []
    for point in sorted(os.listdir(os.path.join(sweep, paths.POINTS_DIR))):
        result = pair.main(os.path.join(sweep, paths.POINTS_DIR, point), os.path.join(out, point), args.rounds,
                           ["suite"], say=lambda line: print(f"  {point}: {line}", flush=True))
        bare = result["bare"]["suite"]
        if result["harness_error"] or bare["error"]:
            rows.append(f"| {point} | failed: {result['harness_error'] or bare['error']} | | | |")
            continue
        s = spread(result["harness"], bare["samples_per_s"])
        rows.append(f"| {point} | {statistics.median(result['harness']):,.1f} | "
                    f"{statistics.median(bare['samples_per_s']):,.1f} | {s.median:.3f} ({s.low:.3f}-{s.high:.3f}) | "
                    f"{'yes' if s.within_noise else 'no'} | "
                    f"{', '.join(f'{x:.3f}' for x in s.ratios)} |")
    print(f"\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {machine()}; "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}; {args.rounds} rounds of {args.warmup} + {args.steps} "
          f"steps at batch {args.batch}, {args.precision}\n    {' '.join(['.venv/bin/python'] + sys.argv)}\n")
    print("| point | harness samples/s (median) | bare samples/s (median) | harness / bare (min-max) "
          "| spread includes 1.0 | per round |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
