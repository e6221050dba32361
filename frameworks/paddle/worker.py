"""PaddlePaddle's training session (stdlib + numpy + paddle only; the adapter is
frameworks/paddle/__init__.py).

Dynamic graph (eager) training, which `compile=auto` (the default) keeps, as PaddleClas
and PaddleNLP train (contract/modes.py). `compile` converts the forward pass and the loss to
a static program with `paddle.jit.to_static` (Paddle's graph mode; the backward
runs as that program's gradient, the optimizer update stays eager). AMP is
`paddle.amp.auto_cast` at level O1: on a GPU fp16 with a GradScaler, or bf16, as the
spec's amp_dtype says; on a CPU bf16, which Paddle 3.3 applies only inside a
to_static program (in eager mode its amp_guard switches itself off on a CPU place),
so precision=amp on a CPU needs compile=true and fails plainly without it.

Data parallel when WORLD_SIZE > 1: paddle.DataParallel over the process group of
`paddle.distributed.init_parallel_env`, gloo on CPU (PADDLE_DISTRI_BACKEND=gloo),
NCCL on GPUs. Paddle's own rendezvous store waits 900 s, fixed; the suite's bounded
rendezvous (frameworks/common/rendezvous.py, on MASTER_PORT, within the spec's
rendezvous_timeout_s) comes first, so that a missing rank fails the run in time.
Paddle reads the rank contract from PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM,
PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT and PADDLE_MASTER, which are
derived here from RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
"""
import hashlib
import os
import signal
import warnings

import numpy as np

from frameworks.common import accelerator, capability, datafiles
from frameworks.common.session import Session
from contract import modes
from frameworks.common.rendezvous import rendezvous

os.environ.setdefault("GLOG_minloglevel", "1")  # Paddle's C++ INFO lines drown the rank log
_sigterm = signal.getsignal(signal.SIGTERM)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "No ccache found": irrelevant to a training run
    import paddle
    import paddle.distributed as paddle_dist
    from paddle import nn


def _restore_sigterm():
    """Paddle installs C++ handlers for SIGTERM that abort the process: give it back to
    the harness (its SIGTERM ends a rank with a `cancelled` record)."""
    if _sigterm not in (None, signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _sigterm)


_restore_sigterm()
# Once per BatchNorm layer and step otherwise; it says that running statistics are kept.
warnings.filterwarnings("ignore", message="When training, we now always track")

from frameworks.paddle import models  # noqa: E402  (after paddle and the SIGTERM fix)

class TrainStep(nn.Layer):
    """Forward and loss of one step, under auto_cast when AMP is on: the unit that
    paddle.jit.to_static compiles and paddle.DataParallel wraps. to_static needs a
    fixed signature (no *args), hence one subclass per model."""

    def __init__(self, model, loss_fn, amp, amp_dtype):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.amp = amp
        self.amp_dtype = amp_dtype


class ResNetStep(TrainStep):
    def forward(self, images, labels):
        with paddle.amp.auto_cast(enable=self.amp, dtype=self.amp_dtype, level="O1"):
            return self.loss_fn(self.model(images), labels)


class BertStep(TrainStep):
    def forward(self, tokens, token_types, attention_mask, masked_positions, masked_ids, nsp_labels):
        with paddle.amp.auto_cast(enable=self.amp, dtype=self.amp_dtype, level="O1"):
            return self.loss_fn(self.model(tokens, token_types, attention_mask, masked_positions),
                                masked_ids, nsp_labels)


STEPS = {"resnet50": ResNetStep, "bert_base": BertStep}


def _paddle_env(dist) -> dict:
    """Paddle's rank variables from the suite's contract. The gloo and NCCL process groups
    meet through the TCP store at PADDLE_MASTER (MASTER_PORT + 1; MASTER_PORT itself
    is the suite's bounded rendezvous); the endpoints are only checked for presence by that
    path and follow Paddle's convention that the first one is the master's."""
    addr, port = dist.master_addr, dist.master_port
    endpoints = [f"{addr}:{port + 1 + r}" for r in range(dist.world_size)]
    return {"PADDLE_TRAINER_ID": str(dist.rank), "PADDLE_TRAINERS_NUM": str(dist.world_size),
            "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints),
            "PADDLE_CURRENT_ENDPOINT": endpoints[dist.rank],
            "PADDLE_MASTER": f"{addr}:{port + 1}"}


class PaddleSession(Session):
    framework_version = paddle.__version__

    def __init__(self, spec, dist):
        self.dist = dist
        gpus = self._device(spec)
        self.group = None
        if dist.distributed:
            self._join(spec, gpus)
        self._model(spec)
        _restore_sigterm()

    # -- construction, in order

    def _device(self, spec) -> int:
        """The rank's place (a GPU, or the CPU) and AMP dtype; the GPUs Paddle sees."""
        gpus = paddle.device.cuda.device_count() if paddle.device.is_compiled_with_cuda() else 0
        self.gpu = accelerator.use_gpu(spec, gpus, "Paddle", "paddlepaddle is the CPU build; "
                                       "paddlepaddle-gpu the CUDA one")
        self.place = f"gpu:{self.dist.local_rank % gpus}" if self.gpu else "cpu"
        paddle.set_device(self.place)
        self.amp = spec.precision == "amp"
        self.compile = bool(spec.compile)
        capability.require("paddle", spec, (tuple(paddle.device.cuda.get_device_capability(self.place))
                                            if self.gpu else None))
        self.amp_dtype = {"bf16": "bfloat16", "fp16": "float16"}[
            accelerator.amp_dtype(spec, self.gpu) or "bf16"]  # (unused by fp32 runs)
        return gpus

    def _join(self, spec, gpus):
        """Paddle's process group, after the suite's bounded rendezvous (module docstring)."""
        dist = self.dist
        os.environ.update(_paddle_env(dist))
        if self.gpu:  # init_parallel_env's NCCL path requires it
            os.environ["FLAGS_selected_gpus"] = str(dist.local_rank % gpus)
        else:
            os.environ["PADDLE_DISTRI_BACKEND"] = "gloo"
        rendezvous(dist, spec.rendezvous_timeout_s)  # all here, or TimeoutError
        self.group = paddle_dist.init_parallel_env()

    def _model(self, spec):
        """The model, the synthetic batch, the optimizer and the step (to_static where
        compiled, DataParallel over several ranks)."""
        paddle.seed(spec.seed)  # the same initial weights on every rank
        cfg = self.cfg = spec.model
        model, loss_fn = models.build_model(cfg)
        self.model = model
        self.inputs, self.labels = models.synthetic_batch(cfg, spec.batch_size, spec.seed + self.dist.rank)
        self.params = models.trainable_parameters(model)
        self.optimizer = models.build_optimizer(cfg, self.params)
        net = STEPS[cfg.name](model, loss_fn, self.amp, self.amp_dtype)
        if self.compile:
            net = paddle.jit.to_static(net, full_graph=True)
        if self.dist.distributed:
            net = paddle.DataParallel(net)  # broadcasts rank 0's weights, all-reduces gradients
        self.net = net
        self.scaler = (paddle.amp.GradScaler(init_loss_scaling=2.0 ** 16)
                       if self.amp and self.amp_dtype == "float16" else None)

    def step(self):
        loss = self.net(*self.inputs, *self.labels)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.clear_grad(set_to_zero=False)
        return loss.detach()

    def loss_value(self, handle):
        return float(handle.item())

    def sync(self):
        if self.gpu:
            paddle.device.synchronize()

    def barrier(self):
        if self.dist.distributed:
            paddle_dist.barrier()

    def environment(self):
        env = {"device": "cpu", "device_count": 1, "paddle_commit": paddle.version.commit,
               "mkl": paddle.version.with_mkl,
               "compile": "paddle.jit.to_static" if self.compile else "eager",
               "amp": f"auto_cast O1 {self.amp_dtype}" if self.amp else None,
               **modes.recipe_environment(self.cfg)}
        if self.gpu:
            env.update(device=paddle.device.cuda.get_device_name(),
                       device_count=paddle.device.cuda.device_count(),
                       cuda=paddle.version.cuda(), cudnn=paddle.version.cudnn(),
                       nccl=str(paddle.version.nccl()))
        return env

    def parameter_checksum(self) -> str:
        """Sum (float64) and SHA-1 of the trainable weights: equal on every rank of a
        data-parallel run (the harness records it)."""
        digest, total = hashlib.sha1(), 0.0
        for p in self.params:
            a = np.ascontiguousarray(p.numpy())
            digest.update(a.tobytes())
            total += float(a.astype(np.float64).sum())
        return f"sum={total:.10e} sha1={digest.hexdigest()}"

    def peak_device_bytes(self):
        return int(paddle.device.cuda.max_memory_allocated()) if self.gpu else None

    @staticmethod
    def is_oom(exc):
        text = str(exc)
        return isinstance(exc, MemoryError) or "ResourceExhausted" in text \
            or "Out of memory error" in text

    def close(self):
        if self.group is not None:
            paddle_dist.destroy_process_group()
            self.group = None


class FilesSession(datafiles.FromLoader, PaddleSession):
    """data=files: each step takes the paddle.io.DataLoader's next batch
    (frameworks/paddle/loader.py)."""

    def __init__(self, spec, dist):
        super().__init__(spec, dist)
        from frameworks.paddle.loader import Loader
        self.loader = Loader(spec, dist, self.gpu)
