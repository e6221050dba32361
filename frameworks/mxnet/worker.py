"""MXNet's training session (stdlib + numpy + mxnet only; the adapter is
frameworks/mxnet/__init__.py).

Gluon HybridBlocks trained imperatively (autograd.record). `compile` is
`hybridize(static_alloc=True, static_shape=True)`: MXNet's graph mode, which turns
the forward pass and the loss into one cached symbolic graph; `compile=auto` (the
default) hybridizes, as gluon-nlp's and gluon-cv's scripts do (contract/modes.py).
BERT's gradients are clipped by global norm after the push/pull (clip_global_norm). AMP is
`mxnet.contrib.amp` with target bf16 on a CPU (oneDNN kernels); on a GPU fp16 with
its dynamic loss scaling (bf16 AMP in MXNet 1.9 is CPU-only).

Data parallel when WORLD_SIZE > 1: a `dist_sync` KVStore (ps-lite). It needs a
scheduler and servers besides the workers. The ranks first meet through the suite's
bounded rendezvous (frameworks/common/rendezvous.py on MASTER_PORT); then global
rank 0 starts the scheduler on MASTER_ADDR:MASTER_PORT+1, and local rank 0 of every
node starts one server, each as a child process (`python -c "import mxnet"` with DMLC_ROLE set, which is how MXNet's
own launcher starts them). The ranks are the workers; each step pushes every
gradient to the servers, which sum them, and pulls the sum back, and every worker
applies the same update, as all-reduce data parallel does. The push and the pull
are separate calls on purpose: the Trainer's own path (`pushpull`, one request
that the server answers with the merged value) now and then left the two ranks'
weights a few keys apart in our 2-rank runs; with push then pull (MXNet's older
Module path) they stay bitwise equal. ps-lite's start has no time limit of its
own, so it runs in a thread bounded by what is left of rendezvous_timeout_s.
"""
import atexit
import collections
import gc
import hashlib
import os
import queue
import subprocess
import sys
import threading
import time

import numpy as np

from frameworks.common import accelerator, capability, datafiles
from frameworks.common.session import Session
from contract import modes
from frameworks.common.rendezvous import rendezvous

os.environ.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")
import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402

from frameworks.mxnet import models  # noqa: E402

# How long close() waits for ps-lite's orderly stop (a barrier of every node) before it
# kills this rank's scheduler and server: a peer that died must not hold the teardown.
SHUTDOWN_S = 8
CHECKSUM_S = 5  # how long the checksum, or close(), waits for the final weights
# MXNet's engine queues work without limit: a Python loop can enqueue hundreds of steps
# ahead of the computation (holding their memory). Like a GPU's bounded launch queue,
# step() lets at most this many steps be queued or running, then waits for the oldest.
MAX_IN_FLIGHT = 2


def ps_env(dist) -> dict:
    """ps-lite's variables from the suite's contract: the scheduler at the master, one
    server per node, every rank a worker."""
    nodes = max(1, dist.world_size // dist.local_world_size)
    return {"DMLC_PS_ROOT_URI": dist.master_addr, "DMLC_PS_ROOT_PORT": str(dist.master_port + 1),
            "DMLC_NUM_WORKER": str(dist.world_size), "DMLC_NUM_SERVER": str(nodes)}


def start_ps_processes(dist) -> list:
    """The scheduler (global rank 0) and this node's server (local rank 0), as children."""
    roles = (["scheduler"] if dist.rank == 0 else []) + (["server"] if dist.local_rank == 0 else [])
    env = dict(os.environ, **ps_env(dist), OMP_NUM_THREADS="1")
    return [subprocess.Popen([sys.executable, "-c", "import mxnet"], env=dict(env, DMLC_ROLE=role))
            for role in roles]


def create_kvstore(kind: str, timeout_s: float):
    """mx.kv.create(kind), or TimeoutError when not every node joins in time."""
    box = {}

    def target():
        try:
            box["kv"] = mx.kv.create(kind)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller)
            box["error"] = exc

    thread = threading.Thread(target=target, name="kvstore-rendezvous", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"rendezvous: the {kind} kvstore did not gather its scheduler, "
                           f"servers and workers within {timeout_s:.0f}s")
    if "error" in box:
        raise box["error"]
    return box["kv"]


def interruptible(wait, *args):
    """Run a blocking MXNet wait in a helper thread and join it in short slices.

    A C call in the main thread holds off Python's signal handlers until it returns;
    when a peer rank has stopped, a wait on a kvstore result never returns, and the
    harness's SIGTERM (-> a `cancelled` record) would never run. Joining with a
    timeout is interruptible, so SIGTERM still ends the rank with its record."""
    box = {}

    def target():
        try:
            box["value"] = wait(*args)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the caller)
            box["error"] = exc

    thread = threading.Thread(target=target, name="mxnet-wait", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _within(seconds, read):
    """read() in a helper thread, waited on for at most `seconds` (TimeoutError after)."""
    box = {}

    def target():
        try:
            box["value"] = read()
        except BaseException as exc:  # noqa: BLE001  (re-raised in the caller)
            box["error"] = exc

    thread = threading.Thread(target=target, name="mxnet-weights", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(f"weights not ready after {seconds} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class EngineTimer:
    """Step edges as MXNet's engine completes them, not as Python enqueues them.

    MXNet runs every operator asynchronously, on the CPU too, so a step() returns long
    before its work is done and host edges would time the enqueueing. Each step hands
    over a marker: a one-element copy of the weight the trainer updates last, which the
    engine can only compute after that update. A watcher thread waits on the markers in
    order (waiting is a C call that releases the GIL, so it never blocks the stepping
    thread) and stamps their completion. A step spans from its start, or the previous
    step's completion if later, to its own completion: what CUDA events give elsewhere.
    """

    def __init__(self):
        self.begins, self.done = [], []
        self.markers = queue.Queue()
        self.watcher = threading.Thread(target=self._watch, name="mxnet-step-timer", daemon=True)
        self.watcher.start()

    def _watch(self):
        while True:
            marker = self.markers.get()
            if marker is None:
                return
            marker.wait_to_read()
            self.done.append(time.perf_counter())
            self.markers.task_done()

    def drain(self):
        """Wait until every step handed over so far is stamped."""
        self.markers.join()

    def begin(self, i):
        self.begins.append(time.perf_counter())

    def end(self, i):
        pass  # the step's marker arrives through mark()

    def mark(self, marker):
        self.markers.put(marker)

    def read(self, window_start, origin):
        self.markers.put(None)
        self.watcher.join()
        edges, previous = [], float("-inf")
        for begin, done in zip(self.begins, self.done):
            edges.append((max(begin, previous) - origin, done - origin))
            previous = done
        return edges


class MXNetSession(Session):
    framework_version = mx.__version__

    def __init__(self, spec, dist):
        self.dist = dist
        self.children, self.kv, self.trainer = [], None, None
        gpus = mx.context.num_gpus()
        self.gpu = accelerator.use_gpu(spec, gpus, "MXNet", "`mxnet` is the CPU build; `mxnet-cu112` "
                                       "and kin the CUDA ones")
        self.ctx = mx.gpu(dist.local_rank % gpus) if self.gpu else mx.cpu()

        self.amp = spec.precision == "amp"
        dtype = accelerator.amp_dtype(spec, self.gpu) or "bf16"  # (unused by fp32 runs)
        capability.require("mxnet", spec, () if self.gpu else None)  # 1.9 does not tell the capability
        self.amp_dtype = {"bf16": "bfloat16", "fp16": "float16"}[dtype]
        if self.amp:
            from mxnet.contrib import amp
            self.amp_mod = amp
            amp.init(target_dtype=self.amp_dtype)  # before the model exists: it wraps the ops

        deadline = time.monotonic() + spec.rendezvous_timeout_s
        if dist.distributed:
            rendezvous(dist, deadline - time.monotonic())  # every rank is up, or TimeoutError
            os.environ.update(ps_env(dist), DMLC_ROLE="worker")
            self.children = start_ps_processes(dist)
        try:
            self._build(spec, dist, deadline)
        except BaseException:
            self._kill_children()  # close() is never called on a session that failed to build
            raise

    def _build(self, spec, dist, deadline):
        if dist.distributed:
            self.kv = create_kvstore("dist_sync", max(30.0, deadline - time.monotonic()))
        self._model(spec)
        if self.kv is not None:
            self._same_weights()
        self._recipe(spec.model)

    def _model(self, spec):
        """The step's network (hybridized where compiled), the synthetic batch, the Trainer."""
        seed = spec.seed
        mx.random.seed(seed)  # the same initial weights everywhere (and the kvstore's init wins)
        np.random.seed(seed)
        cfg = spec.model
        model, loss, init = models.build_model(cfg)
        self.inputs, self.labels = models.synthetic_batch(cfg, spec.batch_size,
                                                          seed + self.dist.rank, self.ctx)
        self.net = models.TrainStep(model, loss, len(self.inputs))
        self.net.initialize(init, ctx=self.ctx)
        self.compile = bool(spec.compile)
        if self.compile:
            self.net.hybridize(static_alloc=True, static_shape=True)
        name, kwargs = models.optimizer_args(cfg)
        self.params = models.trainable_parameters(self.net)
        # The Trainer updates locally; across ranks the gradients go through self.kv.
        self.trainer = gluon.Trainer(self.params, name, kwargs, kvstore=None)
        self.weights = [p.data(self.ctx) for p in self.trainer._params]
        self.grads = [p.grad(self.ctx) for p in self.trainer._params]

    def _same_weights(self):
        """The kvstore's keys: the gradients', and the weights' once (keys n..), so that
        every rank starts from the first worker's."""
        n = len(self.grads)
        # (init ends in a barrier of all workers: a C wait, hence interruptible)
        interruptible(self.kv.init, list(range(n)), self.grads)
        interruptible(self.kv.init, list(range(n, 2 * n)), self.weights)
        self.kv.pull(list(range(n, 2 * n)), out=self.weights)
        interruptible(mx.nd.waitall)

    def _recipe(self, cfg):
        """AMP's loss scaling, the gradients' divisor and clipping, the step's marker."""
        self.scale_loss = self.amp and self.amp_dtype == "float16"
        if self.scale_loss:
            self.amp_mod.init_trainer(self.trainer)
        # Gradients are summed over workers; dividing by their number averages them
        # (each rank's loss is already the mean over its own batch).
        self.grad_divisor = self.dist.world_size
        # Gradient clipping by global norm (BERT's recipe; None: off), on the summed
        # gradients after the push/pull: bounding the sum by norm x ranks bounds the mean
        # (what the update applies) by norm.
        self.recipe = modes.recipe_environment(cfg)
        self.clip_norm = modes.clip_norm(cfg)
        self.last_weight = self.weights[-1]  # the trainer updates it last
        self.in_flight = collections.deque()
        self.step_timer = None

    def timer(self):
        self.step_timer = EngineTimer()
        return self.step_timer

    def step(self):
        with autograd.record():
            loss = self.net(*self.inputs, *self.labels)
            if self.scale_loss:
                with self.amp_mod.scale_loss(loss, self.trainer) as scaled:
                    autograd.backward(scaled)
        if not self.scale_loss:
            loss.backward()
        if self.kv is not None:
            for i, grad in enumerate(self.grads):  # the sum over ranks, in place
                self.kv.push(i, grad, priority=-i)
                self.kv.pull(i, out=grad, priority=-i)
        if self.clip_norm is not None:
            if self.scale_loss:
                self.amp_mod.unscale(self.trainer)  # AMP's own step before clipping
            # check_isfinite=False: no host read, the engine stays asynchronous.
            gluon.utils.clip_global_norm(self.grads, self.clip_norm * self.grad_divisor,
                                         check_isfinite=False)
        self.trainer.step(self.grad_divisor)
        # A one-element copy of the weight updated last: ready once this step is done.
        marker = mx.nd.slice_axis(self.last_weight, axis=0, begin=0, end=1)
        if self.step_timer is not None:
            self.step_timer.mark(marker)
        self.in_flight.append(marker)
        if len(self.in_flight) > MAX_IN_FLIGHT:
            interruptible(self.in_flight.popleft().wait_to_read)
        return loss

    def loss_value(self, handle):
        return float(interruptible(handle.asscalar))

    def sync(self):
        interruptible(mx.nd.waitall)  # MXNet's engine is asynchronous on the CPU too
        if self.step_timer is not None:
            interruptible(self.step_timer.drain)  # the window ends after every step's end

    def barrier(self):
        if self.kv is not None:
            interruptible(self.kv._barrier)  # KVStore's only barrier (a private name in 1.9)

    def environment(self):
        features = mx.runtime.Features()
        env = {"device": "cpu", "device_count": 1,
               "mxnet_features": sorted(f.name for f in features.values() if f.enabled),
               "compile": "hybridize" if self.compile else "imperative",
               "amp": f"contrib.amp {self.amp_dtype}" if self.amp else None,
               "kvstore": self.kv.type if self.kv is not None else None, **self.recipe}
        if self.gpu:
            env.update(device=f"gpu({self.ctx.device_id})", device_count=mx.context.num_gpus(),
                       cuda=features.is_enabled("CUDA"), cudnn=features.is_enabled("CUDNN"),
                       nccl=features.is_enabled("NCCL"))
        return env

    def parameter_checksum(self) -> str:
        """Sum (float64) and SHA-1 of the trainable weights: equal on every rank of a
        data-parallel run (the harness records it). Bounded by CHECKSUM_S: after a peer
        stopped, the weights wait on a pull that never comes (TimeoutError)."""
        text = _within(CHECKSUM_S, self._weights_digest)
        self.weights_read = True  # so close() need not wait for them again
        return text

    def _weights_digest(self) -> str:
        digest, total = hashlib.sha1(), 0.0
        for _, p in sorted(self.params.items()):
            a = np.ascontiguousarray(p.data(self.ctx).asnumpy())
            digest.update(a.tobytes())
            total += float(a.astype(np.float64).sum())
        return f"sum={total:.10e} sha1={digest.hexdigest()}"

    def _wait_weights(self) -> bool:
        for w in self.weights:
            w.wait_to_read()
        return True

    def peak_device_bytes(self):
        return None  # MXNet 1.9 has no peak-memory query (only free/total per GPU)

    @staticmethod
    def is_oom(exc):
        text = str(exc)
        return isinstance(exc, MemoryError) or "out of memory" in text.lower()

    def close(self):
        # Bounded: after a peer stopped, the final weights wait on a pull that never comes.
        try:
            ready = getattr(self, "weights_read", False) or _within(CHECKSUM_S, self._wait_weights)
        except Exception:  # noqa: BLE001  (TimeoutError, or the engine's own error)
            ready = False
        stopped = self._stop_ps()
        if not (ready and stopped):
            # The engine holds work that can never finish (a peer is gone); MXNet's
            # exit hook would wait for it forever, so the process could not end.
            atexit.unregister(mx.base._notify_shutdown)

    def _stop_ps(self):
        """Free the kvstore (its destructor is ps-lite's stop: a barrier of every node, then
        the servers' stop command), then reap this rank's scheduler and server."""
        if self.kv is None and not self.children:
            return True
        deadline = time.monotonic() + SHUTDOWN_S
        done = threading.Event()

        def release():  # the kvstore's destructor runs here, where the last reference goes
            self.kv = self.trainer = self.net = self.params = None
            self.weights = self.grads = self.last_weight = None
            gc.collect()
            done.set()

        threading.Thread(target=release, name="mxnet-ps-stop", daemon=True).start()
        stopped = done.wait(SHUTDOWN_S)
        self._kill_children(grace_s=deadline - time.monotonic())
        return stopped

    def _kill_children(self, grace_s=0.0):
        """Wait up to grace_s for this rank's scheduler and server to end, then kill them."""
        deadline = time.monotonic() + grace_s
        for child in self.children:
            try:
                child.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self.children = []


class FilesSession(datafiles.FromLoader, MXNetSession):
    """data=files: each step takes the gluon DataLoader's next batch (frameworks/mxnet/loader.py)."""

    def __init__(self, spec, dist):
        super().__init__(spec, dist)
        from frameworks.mxnet.loader import Loader
        self.loader = Loader(spec, dist, self.ctx)
