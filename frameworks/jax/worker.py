"""JAX's training session (stdlib + numpy + jax/flax/optax only; the adapter is
frameworks/jax/__init__.py).

Data parallel when WORLD_SIZE > 1: one JAX process per rank joined by
`jax.distributed.initialize` (the spec's MASTER_ADDR:MASTER_PORT is the
coordinator, `rendezvous_timeout_s` its timeout), a one-axis mesh with one device
per process, and the step under `jax.shard_map`: each rank runs its own batch
(seed + rank) and `jax.lax.pmean` averages the gradients (DDP's all-reduce) and the
BatchNorm running statistics (so they stay identical on every rank, as DDP's
buffer broadcast keeps them); the loss a rank reports is its own, as DDP's. CPU
collectives go through gloo (the `cpu_collectives` option), NCCL on GPUs. Each
rank's record carries a parameter checksum, so that ranks can be compared.

`compile` is XLA on or off (`compile=auto`, the default, is on: JAX's recommended way
to train, contract/modes.py), as DLPerf's and TensorFlow's switch: on, the whole
training step (forward, backward, all-reduce, optimizer) is one `jax.jit`
program that XLA fuses; off, the same Python step runs un-jitted, op by op, each
primitive dispatched as its own small XLA computation (JAX's eager mode, like
PyTorch eager or TensorFlow without jit_compile); with several ranks only the
gradient all-reduce is then a compiled collective. AMP is Flax's mixed precision:
bfloat16 compute, float32 master weights and optimizer state. JAX dispatches
asynchronously, so the per-step edges on the host clock are dispatch edges; the
timed window (closed by `sync`) is what the throughput uses.
"""
import importlib.util
import os
import signal
import time

import numpy as np

import jax
import jax.numpy as jnp
import flax
import jaxlib
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from frameworks.common import accelerator, capability, datafiles
from frameworks.common.session import Session
from contract import modes
from frameworks.common.rendezvous import rendezvous
from frameworks.jax import models

AXIS = "data"
DTYPES = {None: jnp.float32, "bf16": jnp.bfloat16}  # JAX AMP runs bf16 only (capability.py)
INIT_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0,
                         "xla_llvm_disable_expensive_passes": True}


def _compute_capability(device) -> tuple:
    """(major, minor) of a CUDA device ("9.0" in JAX), or () where it does not say."""
    parts = str(getattr(device, "compute_capability", "")).split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def _cuda_plugin_installed() -> bool:
    """Whether this jaxlib can drive NVIDIA GPUs (checked without starting a backend)."""
    for name in ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_plugins.xla_cuda13",
                 "jax_plugins.xla_cuda12"):
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except ImportError:  # the parent package (jax_plugins) is absent
            pass
    return False


def _local_gpu_ids(local_rank):
    """This rank's one GPU among those the process sees (PyTorch's local_rank % count):
    all of the node's, or the one Slurm's --gpus-per-task/--gpu-bind left visible."""
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return [local_rank % len(visible)] if visible else [local_rank]


def configure(spec, distributed: bool) -> bool:
    """JAX's settings from the spec and the framework's options (XLA flags, platform, PRNG,
    CPU collectives), set before the first backend use; whether a GPU may be used."""
    opts = spec.options
    if opts.get("xla_flags"):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {opts['xla_flags']}".strip()
    if spec.device == "cpu":
        jax.config.update("jax_platforms", "cpu")
    if opts.get("prng_impl"):
        jax.config.update("jax_default_prng_impl", opts["prng_impl"])
    # Only with several processes: a lone one has no distributed client, and JAX before 0.5
    # fails its CPU backend when gloo is asked without one (make_gloo_tcp_collectives()).
    if opts.get("cpu_collectives") and distributed:
        jax.config.update("jax_cpu_collectives_implementation", opts["cpu_collectives"])
    return spec.device != "cpu" and _cuda_plugin_installed()


def make_step(model, loss_of, tx, dropout_key, world, reduce, rank_index, local=lambda p: p):
    """One rank's training step (state, inputs, labels) -> (state, its loss of shape (1,)):
    `reduce` averages the gradients and BatchNorm statistics over the ranks, `rank_index`
    draws each rank its own dropout masks, `local` makes the parameters the rank's own
    before the gradient (shard_map's pcast)."""
    def local_step(state, inputs, labels):
        params, stats, opt_state, step = state
        rng = jax.random.fold_in(dropout_key, step)
        if world > 1:  # every rank its own dropout masks
            rng = jax.random.fold_in(rng, rank_index())

        def loss_fn(p):
            variables = {"params": p, "batch_stats": stats} if stats else {"params": p}
            out, mutated = model.apply(variables, *inputs, train=True,
                                       rngs={"dropout": rng}, mutable=["batch_stats"])
            return loss_of(out, *labels), mutated.get("batch_stats", {})

        # `local`: this rank's own gradient, not yet summed over ranks.
        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(local(params))
        if world > 1:  # mean over ranks: gradients and BatchNorm statistics
            grads, new_stats = reduce((grads, new_stats))
        updates, opt_state = tx.update(grads, opt_state, params)
        # The loss is this rank's own, as DDP's (shape (1,): one entry per rank).
        return (optax.apply_updates(params, updates), new_stats, opt_state,
                step + 1), loss.reshape(1)
    return local_step


class JaxSession(Session):
    framework_version = jax.__version__

    def __init__(self, spec, dist):
        self.dist = dist
        # Everything up to the devices must precede the first backend use (jax.devices()...).
        gpu = configure(spec, dist.distributed)
        if dist.distributed:
            self._start_distributed(spec, gpu)
        devices = self._devices(spec)
        self.mesh = Mesh(np.array(devices), (AXIS,))
        self.compile = bool(spec.compile)
        self.recipe = modes.recipe_environment(spec.model)
        capability.require("jax", spec, _compute_capability(self.device)
                           if self.platform == "gpu" else None)
        self.amp_dtype = accelerator.amp_dtype(spec, self.platform == "gpu")  # bf16 on CPUs too
        model, loss_of, state, (inputs, labels) = self._model(spec)
        self._place(state, self._step_fn(model, loss_of, spec.seed), inputs, labels)
        self._reduce_fn = None
        self._last = None

    # ---- construction, in order ---------------------------------------------------------
    def _start_distributed(self, spec, gpu):
        """One JAX process per rank, joined by jax.distributed.initialize within the spec's
        rendezvous timeout."""
        dist, timeout = self.dist, spec.rendezvous_timeout_s
        start = time.monotonic()
        # Our own, bounded, rendezvous first, on MASTER_PORT + 1: JAX's own aborts the
        # process (no exception, so no record) when it times out.
        rendezvous(dist, timeout, port=dist.master_port + 1)
        # JAX's preemption service installs its own SIGTERM handler; without it (and
        # with the harness's handler put back) a cancel still leaves a record.
        jax.config.update("jax_enable_preemption_service", False)
        on_sigterm = signal.getsignal(signal.SIGTERM)
        jax.distributed.initialize(
            coordinator_address=f"{dist.master_addr}:{dist.master_port}",
            num_processes=dist.world_size, process_id=dist.rank,
            local_device_ids=_local_gpu_ids(dist.local_rank) if gpu else None,
            initialization_timeout=max(30, int(timeout - (time.monotonic() - start))))
        if callable(on_sigterm):
            signal.signal(signal.SIGTERM, on_sigterm)

    def _devices(self, spec) -> list:
        """The mesh's devices: one per rank, this rank's own (self.device) among them."""
        dist = self.dist
        self.platform = jax.default_backend()
        accelerator.use_gpu(spec, int(self.platform == "gpu"), "JAX", f"its backend is {self.platform!r}")
        if not dist.distributed:
            local = jax.local_devices()
            self.device = local[dist.local_rank % len(local)]
            return [self.device]
        devices = jax.devices()
        if len(devices) != dist.world_size:
            raise RuntimeError(f"expected one device per rank, JAX sees {len(devices)} devices "
                               f"for {dist.world_size} ranks")
        self.device = jax.local_devices()[0]
        return devices

    def _model(self, spec):
        """(model, its loss, the training state, this rank's synthetic batch): the same
        weights on every rank (one seed), in the AMP dtype's compute."""
        cfg, seed = spec.model, spec.seed
        model, loss_of = models.build_model(cfg, DTYPES[self.amp_dtype])
        batch = models.synthetic_batch(cfg, spec.batch_size, seed + self.dist.rank)
        with jax.default_device(self.device):
            # Jitted (op by op is slow), and on CPUs compiled without LLVM's optimizations:
            # XLA:CPU takes 15-20 s to optimize the dozens of threefry random generators of
            # an init that runs once (2 s without).
            init = jax.jit(lambda: models.init_variables(model, batch[0], seed)).lower()
            variables = init.compile(INIT_COMPILER_OPTIONS if self.platform == "cpu" else None)()
            params = variables["params"]
            stats = variables.get("batch_stats", {})
            self.tx = models.build_optimizer(cfg)
            state = (params, stats, self.tx.init(params), jnp.zeros((), jnp.uint32))
        return model, loss_of, state, batch

    def _step_fn(self, model, loss_of, seed):
        """The training step over the ranks: one XLA program over the global mesh (jit with
        several ranks), else this rank's step with the all-reduce as its own call."""
        dropout_key = jax.random.PRNGKey(seed + 1)
        if self.dist.world_size > 1 and self.compile:
            # Under shard_map the gradient of a replicated (rank-invariant) parameter comes
            # back already summed over ranks; pcast makes the parameters rank-varying first,
            # so the gradient is the rank's own and pmean is the one all-reduce (DDP's mean).
            local_step = make_step(model, loss_of, self.tx, dropout_key, self.dist.world_size,
                                   lambda t: jax.lax.pmean(t, AXIS), lambda: jax.lax.axis_index(AXIS),
                                   lambda p: jax.lax.pcast(p, AXIS, to="varying"))
            return jax.shard_map(local_step, mesh=self.mesh, in_specs=(P(), P(AXIS), P(AXIS)),
                                 out_specs=(P(), P(AXIS)))
        # Without jit and with several ranks, the model and optimizer run op by op and only
        # the all-reduce is a compiled collective, as DDP calls gloo/NCCL from an eager model.
        return make_step(model, loss_of, self.tx, dropout_key, self.dist.world_size,
                         self._all_reduce_mean, lambda: self.dist.rank)

    def _place(self, state, step_fn, inputs, labels):
        """The state and the batch where the step takes them, and the step (jitted or not)."""
        if self.dist.world_size > 1 and self.compile:
            # each rank's shard of the batch, the state replicated over the global mesh
            replicated, sharded = NamedSharding(self.mesh, P()), NamedSharding(self.mesh, P(AXIS))
            self.put = lambda a: jax.make_array_from_process_local_data(sharded, a)
            self.state = jax.device_put(state, replicated)
        else:  # this rank's batch and state on its own device
            self.put = lambda a: jax.device_put(a, self.device)
            self.state = jax.device_put(state, self.device)
        # The batch is the step's argument, never a closed-over constant: a new batch of
        # the same shapes (data=files) reuses the compiled step. `put` places one rank's
        # batch field (frameworks/jax/loader.py uses it too).
        self.inputs, self.labels = tuple(map(self.put, inputs)), tuple(map(self.put, labels))
        self.step_fn = jax.jit(step_fn, donate_argnums=0) if self.compile else step_fn

    def _all_reduce_mean(self, tree):
        """Mean of a pytree of this rank's local arrays over all ranks (eager mode)."""
        if self._reduce_fn is None:
            self._reduce_fn = jax.jit(jax.shard_map(
                lambda t: jax.lax.pmean(t, AXIS), mesh=self.mesh, in_specs=P(AXIS),
                out_specs=P(AXIS)))
        sharded = NamedSharding(self.mesh, P(AXIS))
        world = self.dist.world_size

        def stack(a):
            return jax.make_array_from_single_device_arrays((world,) + a.shape, sharded, [jnp.expand_dims(a, 0)])

        out = self._reduce_fn(jax.tree_util.tree_map(stack, tree))
        return jax.tree_util.tree_map(lambda a: a.addressable_data(0)[0], out)

    def step(self):
        self.state, loss = self.step_fn(self.state, self.inputs, self.labels)
        self._last = loss
        return loss

    def loss_value(self, handle):
        return float(np.asarray(handle.addressable_data(0)).reshape(()))

    def sync(self):
        jax.block_until_ready((self.state, self._last))

    def barrier(self):
        if self.dist.distributed:
            from jax.experimental import multihost_utils
            multihost_utils.sync_global_devices("dlbench barrier")

    def environment(self):
        env = {"device": self.device.device_kind, "device_count": jax.local_device_count(),
               "global_device_count": jax.device_count(), "jax_backend": self.platform,
               "jaxlib": jaxlib.__version__,
               "flax": flax.__version__, "optax": optax.__version__,
               "jit": self.compile, "amp_dtype": self.amp_dtype,
               "xla_flags": os.environ.get("XLA_FLAGS"), **self.recipe}
        if self.dist.distributed and self.platform == "cpu":
            env["cpu_collectives"] = jax.config.jax_cpu_collectives_implementation
        if self.platform == "gpu":
            try:
                from jax._src.lib import cuda_versions
                env.update(cuda=cuda_versions.cuda_runtime_get_version(),
                           cudnn=cuda_versions.cudnn_get_version())
            except Exception:  # noqa: BLE001  (private API: versions are best effort)
                pass
        return env

    def peak_device_bytes(self):
        stats = self.device.memory_stats()
        return stats.get("peak_bytes_in_use") if stats else None

    @staticmethod
    def is_oom(exc):
        text = str(exc)
        return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in text \
            or "Out of memory" in text

    def parameter_checksum(self) -> str:
        """`sum=S steps=N`: S the sum of |w| over parameters and BatchNorm statistics
        (float64, repr), N the optimizer's step count, on this rank. Equal on every rank
        when the all-reduce worked."""
        params, stats, _, step = self.state
        leaves = jax.tree_util.tree_leaves((params, stats))
        total = sum(float(np.abs(np.asarray(x.addressable_data(0), np.float64)).sum())
                    for x in leaves)
        return f"sum={total!r} steps={int(np.asarray(step.addressable_data(0)))}"

    def close(self):
        if self.dist.distributed:
            jax.distributed.shutdown()


class FilesSession(datafiles.FromLoader, JaxSession):
    """data=files: each step takes the grain pipeline's next batch (frameworks/jax/loader.py)."""

    def __init__(self, spec, dist):
        super().__init__(spec, dist)
        from frameworks.jax import loader
        self.loader = loader.Loader(spec, dist, self.put)

    def close(self):
        self.loader.close()
        super().close()
