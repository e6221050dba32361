"""The PyTorch training session every PyTorch model runs in: device and process group,
DDP, torch.compile, AMP, gradient clipping and the CUDA-event timer, written once.

A model family changes what is built through three hooks: `build_model(cfg)`,
`synthetic_batch(cfg, batch_size, seed)` and `build_optimizer(cfg, params)`; by default the
plain model its module defines (frameworks/pytorch/models/: ResNet-50, BERT), and for DLPerf's
special cases (models/wide_deep.py, models/insightface.py) SpecialSession's.
Standard library + torch only: this runs in the framework's Python.
"""
import datetime
import time
from typing import Callable

import torch
# What an optimizer imports on its first use (75 MiB of address space here, 220 MiB where triton
# is installed), imported with the adapter, before the harness's memory cap (memory_limit_mb):
# the cap then counts the model, whatever optional packages torch finds.
import torch._dynamo  # noqa: F401
import torch.distributed as torch_dist

from frameworks.common import accelerator, capability, memory, nvml_energy
from frameworks.common.session import HostTimer, Session
from contract import modes
from frameworks.pytorch import models

# A CPU allocation refused (e.g. under the harness's memory_limit_mb) is out of memory too.
CPU_OOM = ("DefaultCPUAllocator: can't allocate memory", "not enough memory")
# oneDNN, refused its buffers under that cap, says only that it could not create a primitive
# (seen on an AMD EPYC at batch 768 under 150 MiB, the Slurm search test): out of memory where
# the rank runs capped, a failure where it does not (an unsupported primitive is no OOM).
CAPPED_OOM = ("could not create a primitive",)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, None: torch.bfloat16}


class CudaTimer:
    """Step edges as CUDA events, converted to seconds only after the window's sync."""

    device_ends = True   # the harness keeps the host's end of enqueuing each step beside

    def __init__(self):
        self.anchor = torch.cuda.Event(enable_timing=True)
        self.anchor.record()
        self.edges = []

    def begin(self, i):
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self.edges.append([ev, None])

    def end(self, i):
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        self.edges[-1][1] = ev

    def read(self, window_start, origin):
        base = window_start - origin
        ms = self.anchor.elapsed_time
        return [(base + ms(s) / 1e3, base + ms(e) / 1e3) for s, e in self.edges]


def setup_device(spec, dist, group=None):
    """This rank's device and, when `group` (default: more than one rank), its process
    group: gloo on CPU, NCCL on GPUs, bounded by the spec's rendezvous timeout.
    Returns (device, cuda)."""
    cuda = accelerator.use_gpu(spec, torch.cuda.device_count() if torch.cuda.is_available() else 0, "torch")
    device = torch.device("cuda", dist.local_rank % torch.cuda.device_count()) if cuda \
        else torch.device("cpu")
    capability.require("pytorch", spec, torch.cuda.get_device_capability(device) if cuda else None)
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True  # FP32 runs use TF32, as NGC's do
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
    if dist.distributed if group is None else group:
        torch_dist.init_process_group(
            "nccl" if cuda else "gloo", rank=dist.rank, world_size=dist.world_size,
            init_method=f"tcp://{dist.master_addr}:{dist.master_port}",
            timeout=datetime.timedelta(seconds=spec.rendezvous_timeout_s),
            **({"device_id": device} if cuda else {}))
    return device, cuda


class TorchSession(Session):
    framework_version = torch.__version__
    recipe: dict = {}  # the model's recipe (contract/modes.py); none without a model (bench=comm)
    amp_name: str | None = None  # the AMP dtype autocast runs ('bf16' where a CPU was asked fp16), None: fp32

    def __init__(self, spec, dist):
        self.dist = dist
        self.device, self.cuda = setup_device(spec, dist)
        torch.manual_seed(spec.seed)  # the same initial weights on every rank
        cfg = spec.model
        model, self.loss_fn, params = self.build_model(cfg)
        self.inputs, self.labels = self.synthetic_batch(cfg, spec.batch_size, spec.seed + dist.rank)
        self.optimizer = self.build_optimizer(cfg, params)
        # Gradient clipping by global norm (BERT's recipe; None: off), after DDP's all-reduce.
        self.recipe = modes.recipe_environment(cfg)
        self.clip_norm = modes.clip_norm(cfg)
        self.clip_params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if dist.distributed:
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[self.device.index] if self.cuda else None)
        self.model = torch.compile(model) if spec.compile else model
        dtype = accelerator.amp_dtype(spec, self.cuda)
        self.amp, self.amp_dtype = dtype is not None, DTYPES[dtype]
        self.amp_name = dtype
        self.scaler = torch.amp.GradScaler("cuda", enabled=dtype == "fp16")

    # ---- what a model family builds ----------------------------------------------------
    def build_model(self, cfg):
        """(model on the device, loss_fn(outputs, *labels), parameters to optimize)."""
        model, loss_fn = models.build_model(cfg)
        model = model.to(self.device)
        self.channels_last = self.cuda and cfg.get("channels_last", False)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        return model, loss_fn, model.parameters()

    def synthetic_batch(self, cfg, batch_size, seed):
        inputs, labels = models.synthetic_batch(cfg, batch_size, self.device, seed)
        if self.channels_last:
            inputs = (inputs[0].contiguous(memory_format=torch.channels_last),)
        return inputs, labels

    def build_optimizer(self, cfg, params):
        return models.build_optimizer(cfg, params)

    # ---- the harness's surface ---------------------------------------------------------
    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            loss = self.loss_fn(self.model(*self.inputs), *self.labels)
        self.scaler.scale(loss).backward()
        if self.clip_norm is not None:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients (fp16: unscaled)
            torch.nn.utils.clip_grad_norm_(self.clip_params, self.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.detach()

    def loss_value(self, handle):
        return handle.item()

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def barrier(self):
        if self.dist.distributed:
            torch_dist.barrier()

    def timer(self):
        return CudaTimer() if self.cuda else HostTimer()

    def step_syncs(self):
        """On a GPU, whether a step waits on the device (frameworks/pytorch/sync_probe.py)."""
        if not self.cuda:
            return None
        from frameworks.pytorch import sync_probe
        return sync_probe.probe(self.step, self.device)

    def environment(self):
        env = {"device": "cpu", "device_count": 1, "torch_threads": torch.get_num_threads(),
               "autocast_dtype": self.amp_name, **self.recipe}
        if self.cuda:
            env.update(device=torch.cuda.get_device_name(self.device),
                       device_count=torch.cuda.device_count(), cuda=torch.version.cuda,
                       cudnn=torch.backends.cudnn.version(),
                       nccl=".".join(map(str, torch.cuda.nccl.version())))
        return env

    def peak_device_bytes(self):
        return torch.cuda.max_memory_allocated(self.device) if self.cuda else None

    def nvml_device(self):
        return nvml_energy.nvml_id(torch.cuda.get_device_properties(self.device)) if self.cuda else None

    def reset_peak_device_bytes(self) -> bool:
        """The CUDA allocator's peak started afresh (what is alive stays counted: parameters,
        gradients, optimizer states, the batch), so that max_memory_allocated is the timed
        window's, as a CPU rank's peak_tensor_bytes is one timed iteration's."""
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        return self.cuda

    @staticmethod
    def is_oom(exc):
        text = str(exc)
        return (isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or any(m in text for m in CPU_OOM)
                or (memory.capped() and any(m in text for m in CAPPED_OOM)))

    def parameter_checksum(self) -> float:
        """Sum of |p| over the trained parameters, in float64: equal on every rank of a
        data-parallel run (the harness records it). Summed in chunks, so that a special
        case's table of 10^8 rows needs no float64 copy of itself."""
        total = 0.0
        with torch.no_grad():
            for p in self.model.parameters():
                for chunk in p.detach().reshape(-1).split(1 << 24):
                    total += chunk.abs().sum(dtype=torch.float64).item()
        return total

    def close(self):
        # Seen here: ~ProcessGroupGloo joins its worker thread while holding the GIL, and
        # that thread, dropping its last work, waits for the GIL: a deadlock at exit. Let
        # every rank finish, and the workers drop their work, before destroying the group.
        if torch_dist.is_initialized():
            torch_dist.barrier()
            time.sleep(0.2)
            torch_dist.destroy_process_group()


class SpecialSession(TorchSession):
    """TorchSession with a special model (frameworks/pytorch/models/wide_deep.py,
    insightface.py): made on the device itself (a table of 10^8 rows never visits the host),
    with its own synthetic batch (`host_batch`: fixed random inputs made once, as DLPerf's
    synthetic-data runs)."""

    host_batch: Callable | None = None   # (cfg, batch_size, generator) -> (inputs, labels) on the host

    def synthetic_batch(self, cfg, batch_size, seed):
        inputs, labels = type(self).host_batch(cfg, batch_size, torch.Generator().manual_seed(seed))
        return tuple(t.to(self.device) for t in inputs), tuple(t.to(self.device) for t in labels)
