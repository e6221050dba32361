"""The suite's DCP checkpoint against the bare write of the same bytes, on this machine's disk,
sync and async (docs/checkpoint.md).

    .venv/bin/python benchmarks/checkpoint_dcp_vs_bare.py [--dir DIR] [--repeats 5]
        [--layers 8 --hidden 512 --heads 8 --vocab 32000] [--ranks 2]

One real sweep through `python -m launch`: bench=checkpoint, a GPT of the given shape with AdamW
(fp32: its checkpoint is 12 bytes a parameter, the parameter and AdamW's two moments, plus
DCP's metadata), FSDP over `--ranks` local ranks, checkpoint.mode=sync,async, the checkpoint in
DIR (default: a temporary folder under /var/tmp, on the disk rather than a tmpfs), `--repeats`
repeats of one warm-up cycle and one timed cycle each. Prints the report's checkpoint table:
the medians of blocking, durable and load times, GB/s, and the bare write's and read's
(benchmarks/checkpoint_dcp_vs_bare.md).
"""
import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from analysis import load  # noqa: E402
from analysis.figures.checkpoint import checkpoint_table  # noqa: E402
from analysis.sections.checkpoint import render  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default=None, help="checkpoint.dir (default: a temporary folder in /var/tmp)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="dlbench-ckpt-bench-", dir="/var/tmp")
    target = args.dir or os.path.join(work, "checkpoints")
    sweep = os.path.join(work, "sweep")
    cmd = [sys.executable, "-m", "launch", "-m", "bench=checkpoint", "model=gpt", "model.size=tiny",
           f"model.layers={args.layers}", f"model.hidden={args.hidden}", f"model.heads={args.heads}",
           f"model.vocab_size={args.vocab}", "model.seq_len=64", "model.dropout=0.0",
           f"gpus_per_node={args.ranks}", "parallel.fsdp=true", "batch_size=1",
           "checkpoint.mode=sync,async", f"checkpoint.dir={target}", "warmup_steps=1",
           f"repeats={args.repeats}", "launcher=local", "timeout_s=1800", f"hydra.sweep.dir={sweep}"]
    done = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return 1
    table = checkpoint_table(load(sweep))
    print(f"# {datetime.date.today()}, {platform.node()}, {os.cpu_count()} cores; checkpoint.dir {target}")
    print("    " + " ".join(cmd[1:]))
    print(render(table, table.iloc[0:0], []))
    return 0


if __name__ == "__main__":
    sys.exit(main())
