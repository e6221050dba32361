"""Memory per rank as the layouts promise it: a GPT-2 small (12 layers x 768, 12 heads,
vocabulary 50304, tied output; 124M parameters) trained on 1 rank, and on 2 ranks with tensor
parallelism (tp=2) and with FSDP (fsdp=true), with AdamW in fp32.

    .venv/bin/python benchmarks/layout_memory.py [--seq 128] [--device cpu] [--fixed-malloc]

Each layout is one real point through `python -m launch` as a user runs it (launcher=local,
1 repeat, 1 + 2 steps, global batch 2, micro-batch 1: one rank accumulates two micro-batches,
two ranks take one each). The figures are each rank's peaks from its record: on a CPU, its
live tensors' (`memory.peak_tensor_bytes`, what the report shows; frameworks/pytorch/
layouts/tensor_memory.py) and its host peak RSS (ru_maxrss, `peak_host_bytes`: also the process's own
baseline, the interpreter, torch and gloo, and what glibc's malloc keeps of freed blocks); on a
GPU, device memory (torch.cuda.max_memory_allocated). `--fixed-malloc` runs every process with
glibc's mmap threshold fixed at 64 KiB and one malloc arena (MALLOC_MMAP_THRESHOLD_,
MALLOC_ARENA_MAX), under which the RSS follows live memory.

Expected, from the model state alone: 16 bytes a parameter (fp32 parameter, gradient and
AdamW's two moments). One rank holds it all. tp=2 holds half of every split matrix (QKV, the
attention's output, both MLP layers, the vocabulary-split embedding that is also the output)
and all of what tensor parallelism replicates (LayerNorms, the row-split layers' biases, the
position embedding); fsdp=2 holds half of everything, plus, while a block runs, that block's
gathered parameters and unsharded gradients. Prints a Markdown table (benchmarks/layout_memory.md).
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from contract import paths  # noqa: E402

GPT2 = {"layers": 12, "hidden": 768, "heads": 12, "vocab_size": 50304}
LAYOUTS: tuple[tuple[str, int, list[str]], ...] = (
    ("1 rank", 1, []), ("tp=2", 2, ["parallel.tp=2"]), ("fsdp=2", 2, ["parallel.fsdp=true"]))
STATE_BYTES = 16  # fp32 parameter + gradient + AdamW's exp_avg and exp_avg_sq
ENV: dict = {}   # the launcher gives each rank its threads (cores / ranks), as a user runs it
# glibc's malloc keeps freed large blocks in its heap once its mmap threshold has grown, so a
# CPU's peak RSS depends on the order of frees (FSDP frees a gathered block per layer); a fixed
# threshold and one arena (as the harness sets under memory_limit_mb) make it the memory in use
FIXED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "1"}


def counts(seq: int) -> dict:
    """Parameters of GPT-2 small, in total and per tp=2 rank, from its shapes."""
    h, L, v = GPT2["hidden"], GPT2["layers"], GPT2["vocab_size"]
    split = L * (3 * h * h + 3 * h + h * h + 4 * h * h + 4 * h + 4 * h * h) + v * h  # matrices, col biases, vocab
    replicated = L * (4 * h + h + h) + seq * h + 2 * h  # LNs, row-split biases (out, fc2), positions, ln_f
    return {"total": split + replicated, "tp2": split // 2 + replicated}


def run(name, world, extra, seq, device, out, env):
    sweep = os.path.join(out, name.replace("=", "").replace(" ", ""))
    argv = [sys.executable, "-m", "launch", "model=gpt", "model.size=full", "model.dropout=0.0",
            *(f"model.{k}={v}" for k, v in GPT2.items()), f"model.seq_len={seq}",
            "global_batch_size=2", "micro_batch_size=1", f"gpus_per_node={world}",
            "warmup_steps=1", "measure_steps=2", "repeats=1", "launcher=local", f"device={device}",
            "timeout_s=1800", *extra, f"hydra.run.dir={sweep}"]
    res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, **env))
    if res.returncode:
        raise SystemExit(f"{name}: {res.stderr[-2000:]}")
    [point] = paths.point_files(sweep)
    rdir = paths.repeat_dir(os.path.dirname(point), 0)
    recs = [json.load(open(os.path.join(rdir, paths.rank_record_name(r)))) for r in range(world)]
    bad = [r["error"] for r in recs if r["status"] != "ok"]
    if bad:
        raise SystemExit(f"{name}: {bad[0]}")
    kind = "peak_device_bytes" if recs[0]["memory"]["peak_device_bytes"] else "peak_tensor_bytes"
    return {"peak": max(r["memory"][kind] for r in recs), "kind": kind,
            "rss": max(r["memory"]["peak_host_bytes"] for r in recs),
            "held": max(r["parallel"]["parameters"]["held"] for r in recs),
            "model": recs[0]["parallel"]["parameters"]["model"], "argv": argv}


def baseline_rss(env) -> int:
    code = "import resource, torch, torch.distributed; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, **env))
    return int(out.stdout) * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--fixed-malloc", action="store_true",
                    help="glibc's mmap threshold fixed at 64 KiB, one arena, in every process")
    args = ap.parse_args()
    env = dict(ENV, **(FIXED_MALLOC if args.fixed_malloc else {}))
    with tempfile.TemporaryDirectory() as out:
        results = {name: run(name, world, extra, args.seq, args.device, out, env)
                   for name, world, extra in LAYOUTS}
    base = baseline_rss(env)
    n = counts(args.seq)
    assert n["total"] == results["1 rank"]["model"], (n, results["1 rank"]["model"])
    expected = {"1 rank": n["total"], "tp=2": n["tp2"], "fsdp=2": n["total"] / 2}
    one = results["1 rank"]
    gib = 2 ** 30
    print(f"machine: {platform.node()} ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores), {datetime.date.today()}, torch {_torch_version()}")
    print(f"command: .venv/bin/python benchmarks/layout_memory.py --seq {args.seq} --device {args.device}"
          + (" --fixed-malloc" if args.fixed_malloc else ""))
    print(f"model: GPT-2 small, {n['total']:,} parameters, sequence {args.seq}, global batch 2, "
          f"micro-batch 1; memory: {one['kind']} and peak_host_bytes (RSS); a bare rank's "
          f"baseline RSS: {base / gib:.2f} GiB")
    print()
    print("| layout | parameters held per rank | model state expected (GiB) | expected / 1 rank | "
          f"{'live tensors' if one['kind'] == 'peak_tensor_bytes' else 'device memory'}: peak per "
          "rank (GiB) | / 1 rank | peak RSS per rank (GiB) | / 1 rank | RSS - tensors (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        state = expected[name] * STATE_BYTES
        print(f"| {name} | {r['held']:,} | {state / gib:.2f} | {expected[name] / n['total']:.2f} | "
              f"{r['peak'] / gib:.2f} | **{r['peak'] / one['peak']:.3f}** | {r['rss'] / gib:.2f} | "
              f"{r['rss'] / one['rss']:.3f} | {(r['rss'] - r['peak']) / gib:.2f} |")


def _torch_version():
    return subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
