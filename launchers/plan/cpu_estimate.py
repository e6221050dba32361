"""How long a point of GPU size would train on this machine's CPU: one line said before it
starts, so that the defaults (full-size ResNet-50, 7 repeats of 120 steps) never run silent
for an hour (issue 52, item 4).

The rule: seconds = the model's training FLOPs of one sample (contract/models/, by
contract/flops.py's convention) x the global batch (all ranks') x (warm-up + timed steps) x repeats
/ (this machine's cores x TRAIN_GFLOPS_PER_CORE). The ranks share the cores (the local
launcher gives each cores / ranks threads), so the machine's rate is what counts. Start-up
(imports, the model's build) is not counted: the figure is a floor's order of magnitude.
"""
import os

from contract import models
from launchers import auto

# GFLOP/s of training per core, measured: full-size ResNet-50, fp32, batch 8, one rank, PyTorch
# 2.13 eager: 21.1 GFLOP/s on 2 shared cores (load average 8; benchmarks/heartbeat_cost.md, "The
# CPU estimate"). An idle or newer CPU (AVX-512, AMX) trains faster: the estimate errs long.
TRAIN_GFLOPS_PER_CORE = 10.0
CPU_SIZE = "tiny"   # every model's CPU size (conf/model/*.yaml); any other is sized for GPUs


def seconds(flops_per_sample: float, global_batch: int, steps: int, repeats: int,
            cores: int) -> float:
    return flops_per_sample * global_batch * steps * repeats / (cores * TRAIN_GFLOPS_PER_CORE * 1e9)


def minutes(s: float) -> str:
    return f"about {s / 60:.0f} minutes" if s >= 90 else f"about {s:.0f} s"


def warning(point, on_cpu: bool | None = None, cores: int | None = None) -> str | None:
    """The line for a local point of GPU size that will train on this CPU, else None."""
    size = point.model.get("size")
    if point.launcher.name != "local" or size in (None, CPU_SIZE) or point.bench != "train":
        return None
    if on_cpu is None:
        on_cpu = auto.on_cpu(point)
    spec = models.find(point.model.get("name"))
    flops = spec.flops_per_sample(point.model) if spec is not None else None
    if not on_cpu or not flops:
        return None
    steps = point.warmup_steps + point.measure_steps
    global_batch = (point.parallel.global_batch_size if point.parallel is not None
                    else point.batch_size * point.world_size)
    s = seconds(flops, global_batch, steps, point.repeats, cores or os.cpu_count() or 1)
    return (f"model.size={size} on cpu: {point.model.get('name')} at batch {point.batch_size}"
            f"{f' x {point.world_size} ranks' if point.world_size > 1 else ''}, {point.repeats} "
            f"repeats x {steps} steps: {minutes(s)}; preset=smoke for a quick look")
