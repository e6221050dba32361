"""MindSpore's training session (stdlib + numpy + mindspore only; the adapter is
frameworks/mindspore/__init__.py).

A functional training step: `mindspore.value_and_grad` over the network and
loss, then the optimizer. `compile` selects GRAPH_MODE with the whole step under
`mindspore.jit` (one compiled graph: forward, backward, all-reduce, update);
without it the step runs op by op in PYNATIVE_MODE. `compile=auto` (the default) is
GRAPH_MODE, as MindSpore's model_zoo trains (contract/modes.py). BERT's gradients
are clipped by global norm (ops.clip_by_global_norm) after the all-reduce. AMP is
`mindspore.amp.auto_mixed_precision` at level O2 in the spec's amp_dtype, with a
dynamic loss scaler for fp16. MindSpore 2.10's CPU kernels have no bfloat16
Conv2D, MatMul or Gather, so bf16 AMP fails on CPU with an error that says so;
fp16 AMP trains (ops without an fp16 CPU kernel fall back to fp32).

Data parallel (WORLD_SIZE > 1) uses MindSpore's dynamic cluster: every rank is an
MS_WORKER whose MS_NODE_ID is its RANK, rank 0 starts the MS_SCHED scheduler as a
subprocess on MASTER_ADDR:MASTER_PORT, MS_TOPO_TIMEOUT carries the rendezvous
timeout, and `communication.init()` joins (mccl on CPU, nccl on GPUs, hccl on
Ascend). Gradients are averaged with nn.DistributedGradReducer.
"""
import os
import re
import subprocess
import sys

import numpy as np

import mindspore as ms
from mindspore import nn, ops

try:
    from mindspore.graph.api import _pynative_executor
except ImportError:  # before 2.7 it lived in mindspore.common.api
    from mindspore.common.api import _pynative_executor

from frameworks.common import accelerator, capability, datafiles
from frameworks.common.session import Session
from contract import modes
from frameworks.mindspore import models

# The scheduler process of the dynamic cluster: it only networks the workers. It lives
# as long as rank 0 (its parent): MindSpore finalizes a cluster at process exit, so
# rank 0 unregisters while the scheduler is still there, and then the scheduler leaves.
_SCHEDULER = """
import os, sys, time
import mindspore as ms
from mindspore.communication import init
ms.set_device("CPU")
init()
while os.getppid() == int(sys.argv[1]):
    time.sleep(0.2)
"""


def _device_target(spec, options):
    """CPU, GPU or Ascend: the option `device_target` wins, else the spec's device."""
    if options.get("device_target"):
        return options["device_target"]
    if spec.device == "cpu":
        return "CPU"
    if spec.device == "cuda":
        accelerator.use_gpu(spec, 1 if ms.hal.is_available("GPU") else 0, "MindSpore",
                        "this build has no usable GPU backend")
        return "GPU"
    return "CPU"  # auto: a GPU or Ascend run names its target in options.device_target


class MindSporeSession(Session):
    framework_version = ms.__version__

    def __init__(self, spec, dist):
        self.dist = dist
        self.scheduler = None
        self.target = _device_target(spec, spec.options)
        self.compiled = bool(spec.compile)
        capability.require("mindspore", spec, None if self.target == "CPU" else ())
        if self.target == "CPU":
            ms.set_device("CPU")
        else:
            ms.set_device(self.target, dist.local_rank)
        ms.set_context(mode=ms.GRAPH_MODE if self.compiled else ms.PYNATIVE_MODE)
        if dist.distributed:
            self._init_cluster(spec, spec.options)
        ms.set_seed(spec.seed)  # the same initial weights on every rank
        self._model(spec)
        self.train_step = self._train_step(spec.model)
        self.checked = False

    # -- construction, in order

    def _model(self, spec):
        """The network (mixed precision O2 in the AMP dtype), the synthetic batch, the
        optimizer."""
        cfg = spec.model
        net, self.loss_fn = models.build_model(cfg)
        self.amp = spec.precision == "amp"
        self.amp_dtype = accelerator.amp_dtype(spec, self.target != "CPU", cpu_dtypes=("bf16", "fp16"))
        if self.amp:
            dtype = {"bf16": ms.bfloat16, "fp16": ms.float16}[self.amp_dtype]
            net = ms.amp.auto_mixed_precision(net, "O2", dtype=dtype)
        net.set_train(True)
        self.net = net
        self.inputs, self.labels = models.synthetic_batch(cfg, spec.batch_size, spec.seed + self.dist.rank)
        self.optimizer = models.build_optimizer(cfg, net.trainable_params())

    def _train_step(self, cfg):
        """The step as a function of the batch (inputs, then labels: data=files feeds each
        step's): gradients, the all-reduce, the loss scaler, clipping, the update; under
        mindspore.jit where compiled."""
        net, loss_fn, optimizer = self.net, self.loss_fn, self.optimizer
        params = optimizer.parameters
        scaler = ms.amp.DynamicLossScaler(2.0 ** 16, 2, 1000) if self.amp_dtype == "fp16" else None
        reducer = None
        if self.dist.distributed:
            from mindspore.communication import GlobalComm
            reducer = nn.DistributedGradReducer(params, mean=True, degree=self.dist.world_size,
                                                group=GlobalComm.WORLD_COMM_GROUP)
        n = len(self.inputs)
        # Gradient clipping by global norm (BERT's recipe; None: off), as model_zoo's BERT:
        # after the all-reduce and the loss scaler's unscale.
        self.recipe = modes.recipe_environment(cfg)
        clip = modes.clip_norm(cfg)

        def forward(*batch):
            loss = loss_fn(net(*batch[:n]), *batch[n:])
            return (scaler.scale(loss), loss) if scaler is not None else (loss, loss)

        grad_fn = ms.value_and_grad(forward, None, params, has_aux=True)

        def train_step(*batch):
            (_, loss), grads = grad_fn(*batch)
            if reducer is not None:
                grads = reducer(grads)
            if scaler is not None:
                grads = scaler.unscale(grads)
                finite = ms.amp.all_finite(grads)
                if finite:
                    if clip is not None:
                        grads = ops.clip_by_global_norm(grads, clip)
                    optimizer(grads)
                scaler.adjust(finite)
            else:
                if clip is not None:
                    grads = ops.clip_by_global_norm(grads, clip)
                optimizer(grads)
            return loss

        return ms.jit(train_step) if self.compiled else train_step

    def _init_cluster(self, spec, options):
        dist = self.dist
        timeout = int(spec.rendezvous_timeout_s)
        env = {"MS_WORKER_NUM": str(dist.world_size), "MS_SCHED_HOST": dist.master_addr,
               "MS_SCHED_PORT": str(dist.master_port), "MS_TOPO_TIMEOUT": str(timeout)}
        os.environ.update(env, MS_ROLE="MS_WORKER", MS_NODE_ID=str(dist.rank))
        if dist.rank == 0:
            sched_env = dict(os.environ, MS_ROLE="MS_SCHED", GLOG_v="3", **env)
            sched_env.pop("MS_NODE_ID")
            self.scheduler = subprocess.Popen([sys.executable, "-c", _SCHEDULER, str(os.getpid())],
                                              env=sched_env)
        from mindspore.communication import get_group_size, get_rank, init
        init()
        if get_group_size() != dist.world_size:
            raise RuntimeError(f"MindSpore cluster has {get_group_size()} ranks, expected {dist.world_size}")
        self.ms_rank = get_rank()

    def step(self):
        if self.checked:
            return self.train_step(*self.inputs, *self.labels)
        try:
            loss = self.train_step(*self.inputs, *self.labels)
            loss.asnumpy()  # the first step surfaces kernel-selection errors here
        except (TypeError, RuntimeError) as exc:
            op = re.search(r"Select \w+ operator\[(\w+)\] fail! Unsupported data type", str(exc))
            if self.amp and op:
                raise capability.Unsupported(
                    f"MindSpore {ms.__version__} on {self.target} has no {self.amp_dtype} kernel "
                    f"for {op.group(1)}: precision=amp with amp_dtype={self.amp_dtype} cannot train "
                    f"here (precision.amp_dtype=fp16 does)") from exc
            raise
        self.checked = True
        return loss

    def loss_value(self, handle):
        return float(handle.asnumpy())

    def sync(self):
        # PyNative queues ops to a pipeline; its executor's sync waits for them (what
        # mindspore.train.Model does). runtime.synchronize() covers the device streams,
        # and only exists for GPU and Ascend.
        _pynative_executor.sync()
        if self.target != "CPU":
            ms.runtime.synchronize()

    def barrier(self):
        if self.dist.distributed:
            # The Barrier op has no CPU kernel (2.10), nor has comm_func.all_reduce; the AllReduce primitive
            # of one number, read
            # back, meets every rank just the same.
            ops.AllReduce()(ms.Tensor(np.ones(1, np.float32))).asnumpy()

    def environment(self):
        env = {"device": self.target.lower(), "device_count": 1,
               "mode": "GRAPH_MODE+jit" if self.compiled else "PYNATIVE_MODE",
               "amp": f"O2 {self.amp_dtype}" if self.amp else None, **self.recipe}
        if self.dist.distributed:
            env.update(comm_backend=self._comm_backend(), ms_rank=self.ms_rank)
        if self.target == "GPU":
            env.update(device=ms.hal.get_device_name(self.dist.local_rank),
                       device_count=ms.hal.device_count())
        return env

    @staticmethod
    def _comm_backend():
        from mindspore.communication import GlobalComm
        return GlobalComm.BACKEND

    def peak_device_bytes(self):
        return None if self.target == "CPU" else int(ms.runtime.max_memory_allocated())

    @staticmethod
    def is_oom(exc):
        text = str(exc)
        return isinstance(exc, MemoryError) or (
            isinstance(exc, RuntimeError) and ("Out of memory" in text or "Malloc device memory failed" in text))

    def parameter_checksum(self):
        """Sum of all trainable weights (float64): equal on every rank while data parallel
        keeps them in sync (the harness records it)."""
        return float(sum(np.asarray(p.asnumpy(), np.float64).sum() for p in self.net.trainable_params()))

    def close(self):
        if self.dist.distributed:
            from mindspore.communication import release
            try:
                release()
            except Exception:
                pass
        # The scheduler is not waited for here: it ends after this process has exited.


class FilesSession(datafiles.FromLoader, MindSporeSession):
    """data=files: each step takes the mindspore.dataset pipeline's next batch
    (frameworks/mindspore/loader.py)."""

    def __init__(self, spec, dist):
        super().__init__(spec, dist)
        from frameworks.mindspore.loader import Loader
        self.loader = Loader(spec, dist)
