"""PyTorch adapter: `build(spec, dist)` for the harness (stdlib + torch only).

Data parallel with DistributedDataParallel when WORLD_SIZE > 1: gloo on CPU,
NCCL on GPUs. AMP is bf16 autocast on CPU; on a GPU fp16 with a gradient
scaler, or bf16, as the spec's amp_dtype says. `compile` wraps the model in
torch.compile, PyTorch's counterpart of XLA.
"""
import datetime

import torch
import torch.distributed as torch_dist

from frameworks.common import capability, harness
from frameworks.pytorch import models

# A CPU allocation refused (e.g. under the harness's memory_limit_mb) is out of memory too.
CPU_OOM = ("DefaultCPUAllocator: can't allocate memory", "not enough memory")


class CudaTimer:
    """Step edges as CUDA events, converted to seconds only after the window's sync."""

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
    cuda = spec.get("device", "auto") in ("auto", "cuda") and torch.cuda.is_available()
    if spec.get("device") == "cuda" and not cuda:
        raise RuntimeError("device=cuda asked for, but torch sees no CUDA device")
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
            timeout=datetime.timedelta(seconds=spec.get("rendezvous_timeout_s", 300)),
            **({"device_id": device} if cuda else {}))
    return device, cuda


class TorchSession(harness.Session):
    framework_version = torch.__version__

    def __init__(self, spec, dist):
        self.dist = dist
        self.device, cuda = setup_device(spec, dist)
        torch.manual_seed(spec.get("seed", 0))
        cfg = spec["model"]
        model, self.loss_fn = models.build_model(cfg)
        model = model.to(self.device)
        self.channels_last = cuda and cfg.get("channels_last", False)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.inputs, self.labels = models.synthetic_batch(cfg, spec["batch_size"], self.device,
                                                          spec.get("seed", 0) + dist.rank)
        if self.channels_last:
            self.inputs = (self.inputs[0].contiguous(memory_format=torch.channels_last),)
        self.optimizer = models.build_optimizer(cfg, model.parameters())
        if dist.distributed:
            model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[self.device.index] if cuda else None)
        self.model = torch.compile(model) if spec.get("compile") else model
        self.amp = spec["precision"] == "amp"
        dtype = spec.get("amp_dtype", "bf16") if cuda else "bf16"  # CPU autocast is bf16
        self.amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp and self.amp_dtype == torch.float16)
        self.cuda = cuda

    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            loss = self.loss_fn(self.model(*self.inputs), *self.labels)
        self.scaler.scale(loss).backward()
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
        return CudaTimer() if self.cuda else harness.HostTimer()

    def environment(self):
        env = {"device": "cpu", "device_count": 1, "torch_threads": torch.get_num_threads()}
        if self.cuda:
            env.update(device=torch.cuda.get_device_name(self.device),
                       device_count=torch.cuda.device_count(), cuda=torch.version.cuda,
                       cudnn=torch.backends.cudnn.version(),
                       nccl=".".join(map(str, torch.cuda.nccl.version())))
        return env

    def peak_device_bytes(self):
        return torch.cuda.max_memory_allocated(self.device) if self.cuda else None

    def is_oom(self, exc):
        return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or any(m in str(exc) for m in CPU_OOM)

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
        if torch_dist.is_initialized():
            torch_dist.destroy_process_group()


def build(spec, dist):
    if spec["model"]["name"] in ("wide_deep", "gpt", "insightface"):  # DLPerf's special cases
        from frameworks.pytorch import special  # it subclasses TorchSession: imported here
        return special.build(spec, dist)
    return TorchSession(spec, dist)
