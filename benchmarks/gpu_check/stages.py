"""The stages of a GPU check, in the order they run (the most telling first, torch.compile's
long compile last), each a command and a time limit, at a device's sizes.

On a GPU (one H100 or H200: all of it within 8 minutes): ResNet-50 AMP at batch 256,
channels_last, bf16 and fp16 with its loss scaling; the same step as bare loops (the suite's
model without the harness, and torchvision's ResNet-50, an idiomatic loop no one here wrote),
each alternated with the harness's rank, ROUNDS rounds each (pair.py);
BERT-base AMP, traced after its timed window (profile=true: its trace gzip'd, split into compute,
communication and idle), and its bare loop, alternated the same way; Llama 3 1B (bf16, a sequence
of 8192); the mixtures of experts at their gpu1 sizes (each family's widths, 1.7-2.8B
parameters); DLPerf's 1-GPU GPT case; a pipeline of two stages where two GPUs exist; `launch
health` with its NVML checks; NCCL's all_reduce over every GPU where two exist; an async DCP
checkpoint (pinned host memory); ResNet-50 compiled. One repeat each. On a CPU (`--device cpu`):
every stage at tiny sizes, a few steps, two rounds a bare loop; the pipeline and the
all_reduce on two processes.

A stage's command is `python -m launch ...` (its sweep in OUT/<stage>/) or, for a bare loop,
pair.py on a point of a sweep (the harness's rounds' records in OUT/<stage>/); `argv(ctx)` returns
it, or a string: why the stage cannot run here.
"""
import glob
import os
from dataclasses import dataclass
from typing import Callable, Optional

from contract import busbw, paths   # the standard library's only


@dataclass(frozen=True)
class Stage:
    name: str
    kind: str                     # sweep | bare | health | comm | checkpoint (figures.py reads each)
    limit_s: dict                 # device -> seconds
    argv: Callable                # Context -> [args after the interpreter] | why it cannot run
    of: Optional[str] = None      # the stage whose sweep a bare loop repeats
    point: int = 0                # which of its points
    bare: tuple = ()              # a bare stage's (bare.py kind, its row's name), one row each

    def limit(self, device: str) -> int:
        return self.limit_s[device]


@dataclass(frozen=True)
class Context:
    device: str                   # cuda | cpu
    gpus: int                     # the devices a stage may use (a CPU rehearses 2 processes)
    out: str                      # the check's folder
    limit: int = 0                # the stage's seconds (the runner sets it)

    @property
    def cpu(self) -> bool:
        return self.device == "cpu"


# a GPU's sizes, then a CPU's (tiny models, few steps, one repeat)
RN50 = {"cuda": ["batch_size=256", "model.channels_last=true", "warmup_steps=10", "measure_steps=50"],
        "cpu": ["model.size=tiny", "batch_size=8", "warmup_steps=2", "measure_steps=5"]}
# BERT's 100 timed steps (DLPerf's): about 3 s on an H200 (30 ms a step), past the 2 s under
# which NVML's energy counter is too coarse (contract/energy.py); 50 were 1.5 s
BERT = {"cuda": ["batch_size=64", "warmup_steps=10", "measure_steps=100"],
        "cpu": ["model.size=tiny", "batch_size=8", "warmup_steps=2", "measure_steps=5"]}
LLAMA = {"cuda": ["model.size=1b", "batch_size=1", "warmup_steps=3", "measure_steps=10"],
         "cpu": ["model.size=tiny", "batch_size=2", "warmup_steps=2", "measure_steps=3"]}
# each family's gpu1 size (its own widths, 2-3 layers: 1.7-2.8B parameters that load one 80 GB GPU
# with AdamW's state; conf/model/<name>.yaml), so that MFU, memory and expert load say something
MOE = {"cuda": ["model.size=gpu1", "batch_size=1", "warmup_steps=3", "measure_steps=10"],
       "cpu": ["model.size=tiny", "batch_size=2", "warmup_steps=2", "measure_steps=3"]}
GPT = {"cuda": ["gpt_case=MP_1x1x1_8_768x12", "warmup_steps=5", "measure_steps=20"],
       "cpu": ["gpt_case_tiny=DP_1x1x1_8_64x4", "warmup_steps=2", "measure_steps=3"]}
PIPELINE = {"cuda": ["model.size=1b", "batch_size=1", "global_batch_size=4", "warmup_steps=3",
                     "measure_steps=10"],
            "cpu": ["model.size=tiny", "batch_size=2", "global_batch_size=4", "warmup_steps=2",
                    "measure_steps=3"]}
COMM = {"cuda": ["bench.min_bytes=1M", "bench.max_bytes=1G", "bench.factor=4", "bench.iters=20"],
        "cpu": ["bench.min_bytes=64K", "bench.max_bytes=4M", "bench.factor=4", "bench.iters=5"]}
CHECKPOINT = {"cuda": ["batch_size=32", "warmup_steps=1"],       # ResNet-50's state: 200 MB
              "cpu": ["model.size=tiny", "batch_size=2", "warmup_steps=1"]}
# harness and bare rounds alternated in a bare loop's stage (pair.py); a CPU's tiny sizes make its
# ratio no measure of the harness (benchmarks/gpu_check.md): two rounds show the alternation, a
# third would cost three more rank starts (about 10 s of CPU in the rehearsal)
ROUNDS = {"cuda": 3, "cpu": 2}


def _sweep(name: str, *args, sizes=None):
    """A stage's `python -m launch -m ...`: the sweep in OUT/<name>, its ranks local, one
    repeat, which its launcher stops past the stage's limit (a `timeout` of its own)."""
    def argv(ctx):
        return ["-m", "launch", "-m", *args, *(sizes[ctx.device] if sizes else ()), f"device={ctx.device}",
                "launcher=local", "repeats=1", f"timeout_s={max(20, ctx.limit - 15)}",
                f"hydra.sweep.dir={os.path.join(ctx.out, name)}"]
    return argv


def _points(ctx, stage: str) -> list:
    """The folder of each point of a stage's sweep that has its first repeat's spec.json, in
    point order."""
    specs = glob.glob(os.path.join(ctx.out, stage, paths.POINTS_DIR, "*", paths.repeat_name(0), paths.SPEC_FILE))
    return sorted(os.path.dirname(os.path.dirname(s)) for s in specs)


def _bare(name: str, of: str, kinds, point: int = 0, limit=None) -> Stage:
    """Point `point` of stage `of`'s sweep, its harness (the rank) and its bare loops of
    `kinds` ((bare.py kind, row name)) alternated, ROUNDS each (pair.py)."""
    def argv(ctx):
        points = _points(ctx, of)
        if len(points) <= point:
            return f"no point of stage {of} to repeat (it did not run)"
        return ["-m", "benchmarks.gpu_check.pair", points[point], os.path.join(ctx.out, name),
                str(ROUNDS[ctx.device]), ",".join(k for k, _ in kinds)]
    return Stage(name, "bare", limit or {"cuda": 100, "cpu": 75}, argv, of=of, point=point, bare=tuple(kinds))


def _pipeline(ctx):
    if ctx.gpus < 2:
        return f"{ctx.gpus} GPU: a pipeline of two stages needs two"
    return _sweep("llama3-pp2", "model=llama3", "precision=amp", "gpus_per_node=2", "parallel.pp=2",
                  sizes=PIPELINE)(ctx)


def _health(ctx):
    return ["-m", "launch", "health", "nodes=1", f"gpus_per_node={1 if ctx.cpu else ctx.gpus}",
            "launcher=local", f"device={ctx.device}", f"output_root={os.path.join(ctx.out, 'health')}"]


def _comm(ctx):
    """all_reduce over every GPU (two processes over gloo on a CPU): one rank moves nothing
    (contract/busbw.py's `moves`), so one GPU has no figure to give."""
    ranks = 2 if ctx.cpu else ctx.gpus
    if not busbw.moves(ranks):
        return f"{ranks} GPU: an all_reduce moves data between two GPUs or more"
    return _sweep("nccl", "bench=comm", "bench.ops=[all_reduce]", f"gpus_per_node={ranks}", sizes=COMM)(ctx)


STAGES = [
    Stage("rn50", "sweep", {"cuda": 150, "cpu": 60},
          _sweep("rn50", "model=resnet50", "precision=amp", "precision.amp_dtype=bf16,fp16", sizes=RN50)),
    # torchvision's loop shares the bf16 point's harness rounds (one rank start less a round)
    _bare("rn50-bare-bf16", "rn50", [("suite", "rn50-bare-bf16"), ("torchvision", "rn50-bare-torchvision")], 0,
          limit={"cuda": 130, "cpu": 90}),
    _bare("rn50-bare-fp16", "rn50", [("suite", "rn50-bare-fp16")], 1),
    # profile=true: after its timed window, 5 steps traced (gzip'd, in the tarball), split as HTA
    # splits a trace: a row of its own (figures.py); no extra process, no step of the window
    Stage("bert", "sweep", {"cuda": 90, "cpu": 45},
          _sweep("bert", "model=bert_base", "precision=amp", "profile=true", sizes=BERT)),
    _bare("bert-bare", "bert", [("suite", "bert-bare")]),
    Stage("llama3", "sweep", {"cuda": 120, "cpu": 45},
          _sweep("llama3", "model=llama3", "precision=amp", sizes=LLAMA)),
    Stage("moe", "sweep", {"cuda": 150, "cpu": 60},
          _sweep("moe", "model=deepseek_v3,qwen3_moe,gpt_oss", "precision=amp", sizes=MOE)),
    Stage("gpt", "sweep", {"cuda": 90, "cpu": 45}, _sweep("gpt", sizes=GPT)),
    Stage("llama3-pp2", "sweep", {"cuda": 120, "cpu": 60}, _pipeline),
    Stage("health", "health", {"cuda": 60, "cpu": 30}, _health),
    Stage("nccl", "comm", {"cuda": 60, "cpu": 30}, _comm),
    Stage("checkpoint-async", "checkpoint", {"cuda": 90, "cpu": 45},
          _sweep("checkpoint-async", "bench=checkpoint", "checkpoint.mode=async", "model=resnet50",
                 "precision=amp", sizes=CHECKPOINT)),
    Stage("rn50-compile", "sweep", {"cuda": 150, "cpu": 120},
          _sweep("rn50-compile", "model=resnet50", "precision=amp", "compile=true", sizes=RN50)),
]
