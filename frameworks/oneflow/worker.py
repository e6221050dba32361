"""OneFlow's training session (stdlib + numpy + oneflow only; the adapter is
frameworks/oneflow/__init__.py).

OneFlow's eager API mirrors PyTorch's, so the step is the reference's: zero_grad,
forward, loss, backward, optimizer step. `compile` runs the step as a
`oneflow.nn.Graph` (OneFlow's static-graph compiler, its counterpart of XLA), which
`compile=auto` (the default) picks, as OneFlow-Benchmark trains (contract/modes.py).
BERT's gradients are clipped by global norm: clip_grad_norm_ in eager steps, the optimizer
parameter group's clip_grad_max_norm in nn.Graph.

Data parallel (WORLD_SIZE > 1): OneFlow builds its process group when it is
imported, from MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and LOCAL_RANK, which
this module exports (from frameworks.common.distenv, so srun's SLURM_* names
work) before importing it. Eager runs wrap the model in
oneflow.nn.parallel.DistributedDataParallel; graph runs use OneFlow's global
view instead (weights broadcast over all ranks, the batch split along dim 0).
OneFlow's own rendezvous retries forever, so a standard-library rendezvous on
MASTER_PORT, bounded by spec.rendezvous_timeout_s, runs first: OneFlow is only
imported once every rank has arrived.

AMP is oneflow.autocast in eager runs (bf16 only: OneFlow 0.9's GradScaler configures
nn.Graph only, so eager fp16 is `unsupported`) and Graph.config.enable_amp (+ GradScaler
for fp16) in graph runs, on CUDA only: OneFlow 0.9 has no CPU
autocast (it warns and runs float32) and no bf16 CPU matmul, so precision=amp
fails on CPU with an error that says so.

The 0.9.0 wheel is a CUDA 11.7 build for Python <= 3.10 that loads cuDNN 8 and
cuBLAS 11 at import: requirements.txt pins the nvidia-cudnn-cu11 and
nvidia-cublas-cu11 wheels its RPATH already points at, and numpy < 2.
"""
import os

from frameworks.common import accelerator, capability, datafiles
from frameworks.common.session import Session
from contract import modes
from frameworks.common.rendezvous import rendezvous


class OneFlowSession(Session):
    framework_version = None  # set once oneflow is imported

    def __init__(self, spec, dist):
        self.dist = dist
        flow = self.flow = self._join(spec)
        self._device(spec)
        # Gradient clipping by global norm (BERT's recipe; None: off): eager calls
        # clip_grad_norm_ after DDP's all-reduce; nn.Graph clips in its optimizer's update.
        self.recipe = modes.recipe_environment(spec.model)
        self.clip_norm = modes.clip_norm(spec.model)
        flow.manual_seed(spec.seed)  # the same initial weights on every rank
        model = self._model(spec)
        self.to_batch = lambda ts: ts  # a batch as the step takes it (graph: global view)
        if self.compiled:
            self._graph(spec.model, model)
        else:
            self.optimizer = self.models.build_optimizer(spec.model, model.parameters())
            self.model = flow.nn.parallel.DistributedDataParallel(model) if dist.distributed else model
            self.params = list(model.parameters())

    # -- construction, in order

    def _join(self, spec):
        """oneflow, imported once every rank is here: the import joins the process group."""
        dist = self.dist
        if dist.distributed:
            os.environ.update(MASTER_ADDR=dist.master_addr, MASTER_PORT=str(dist.master_port),
                              WORLD_SIZE=str(dist.world_size), RANK=str(dist.rank),
                              LOCAL_RANK=str(dist.local_rank))
            rendezvous(dist, spec.rendezvous_timeout_s)
        import oneflow as flow  # joins the process group when WORLD_SIZE > 1
        import oneflow.sysconfig  # noqa: F401  (flow.sysconfig, for the environment)
        from frameworks.oneflow import models  # imports oneflow too
        self.models, self.framework_version = models, flow.__version__
        if dist.distributed and flow.env.get_world_size() != dist.world_size:
            raise RuntimeError(f"OneFlow sees {flow.env.get_world_size()} ranks, expected {dist.world_size}")
        return flow

    def _device(self, spec):
        """The rank's device, its AMP dtype (OneFlow's), and what it refuses."""
        flow = self.flow
        self.cuda = accelerator.use_gpu(spec, flow.cuda.device_count() if flow.cuda.is_available() else 0,
                                        "OneFlow")
        self.device = flow.device("cuda", self.dist.local_rank % flow.cuda.device_count()) if self.cuda \
            else flow.device("cpu")
        self.compiled = bool(spec.compile)
        self.amp = spec.precision == "amp"
        self.amp_dtype = accelerator.amp_dtype(spec, self.cuda)
        capability.require("oneflow", spec, () if self.cuda else None)  # 0.9 does not tell the capability
        self.autocast_dtype = {"bf16": flow.bfloat16, "fp16": flow.float16, None: None}[self.amp_dtype]
        if self.amp_dtype == "fp16" and not self.compiled:  # flow.amp.GradScaler has no scale() or unscale_()
            raise capability.Unsupported(
                "OneFlow 0.9 has no eager loss scaling (its GradScaler configures nn.Graph "
                "only): fp16 AMP needs compile=true (nn.Graph)")

    def _model(self, spec):
        """The model on the device, in training mode, and the synthetic batch."""
        cfg = spec.model
        model, self.loss_fn = self.models.build_model(cfg)
        model = model.to(self.device)
        model.train()
        self.net = model
        self.inputs, self.labels = self.models.synthetic_batch(
            cfg, spec.batch_size, self.device, spec.seed + self.dist.rank)
        return model

    def _graph(self, cfg, model):
        """The step as an nn.Graph; over several ranks OneFlow's global view: one model
        over all ranks, the batch split."""
        flow, dist = self.flow, self.dist
        if dist.distributed:
            placement = flow.placement(self.device.type, ranks=list(range(dist.world_size)))
            model.to_global(placement=placement, sbp=flow.sbp.broadcast)
            self.to_batch = lambda ts: tuple(
                t.to_global(placement=placement, sbp=flow.sbp.split(0)) for t in ts)
            self.inputs, self.labels = self.to_batch(self.inputs), self.to_batch(self.labels)
        self.optimizer = self.models.build_optimizer(cfg, model.parameters(), clip_in_group=True)
        n, optimizer, loss_fn = len(self.inputs), self.optimizer, self.loss_fn
        dtype, fp16 = self.autocast_dtype, self.amp_dtype == "fp16"

        class TrainGraph(flow.nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(optimizer)
                if dtype is not None:
                    self.config.enable_amp(True, dtype=dtype)
                    if fp16:
                        self.set_grad_scaler(flow.amp.GradScaler(init_scale=2.0 ** 16))

            def build(self, *batch):  # inputs, then labels: data=files feeds each step's
                loss = loss_fn(self.model(*batch[:n]), *batch[n:])
                loss.backward()
                return loss

        self.graph = TrainGraph()

    def step(self):
        if self.compiled:
            return self.graph(*self.inputs, *self.labels)
        flow = self.flow
        self.optimizer.zero_grad()
        with flow.autocast(self.device.type, dtype=self.autocast_dtype or flow.float32,
                           enabled=self.amp):
            loss = self.loss_fn(self.model(*self.inputs), *self.labels)
        loss.backward()  # DDP all-reduces the gradients here
        if self.clip_norm is not None:
            flow.nn.utils.clip_grad_norm_(self.params, self.clip_norm)
        self.optimizer.step()
        return loss.detach()

    def loss_value(self, handle):
        if handle.is_global:  # graph-mode data parallel: the loss over the global batch
            handle = handle.to_global(sbp=self.flow.sbp.broadcast).to_local()
        return handle.item()

    def sync(self):
        # OneFlow's eager ops run on its virtual machine, behind the Python thread.
        self.flow._oneflow_internal.eager.Sync()
        if self.cuda:
            self.flow.cuda.synchronize()

    def barrier(self):
        if self.dist.distributed:
            self.flow.comm.barrier()

    def environment(self):
        flow = self.flow
        env = {"device": "cpu", "device_count": 1,
               "mode": "nn.Graph" if self.compiled else "eager", **self.recipe,
               "oneflow_cuda_build": flow.sysconfig.get_cuda_version() if flow.sysconfig.with_cuda() else None}
        if self.cuda:
            env.update(device=flow.cuda.get_device_name(self.device),
                       device_count=flow.cuda.device_count(), cuda=flow.sysconfig.get_cuda_version())
        return env

    def parameter_checksum(self):
        """Sum of all weights (float64): equal on every rank while data parallel keeps them
        in sync (the harness records it)."""
        total = 0.0
        for p in self.net.parameters():
            p = p.to_local() if p.is_global else p
            total += float(p.detach().to(self.flow.float64).sum().item())
        return total

    def peak_device_bytes(self):
        return None  # OneFlow 0.9 exposes no peak-allocation counter

    @staticmethod
    def is_oom(exc):
        text = str(exc).lower()
        return isinstance(exc, MemoryError) or "out of memory" in text


class FilesSession(datafiles.FromLoader, OneFlowSession):
    """data=files: each step takes the oneflow.utils.data.DataLoader's next batch
    (frameworks/oneflow/loader.py)."""

    def __init__(self, spec, dist):
        super().__init__(spec, dist)
        from frameworks.oneflow.loader import Loader
        self.loader = Loader(spec, dist, self.device, self.to_batch)
