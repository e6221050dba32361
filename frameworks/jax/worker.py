"""JAX adapter: `build(spec, dist)` for the harness (stdlib + numpy + jax/flax/optax only).

Data parallel when WORLD_SIZE > 1: one JAX process per rank joined by
`jax.distributed.initialize` (the spec's MASTER_ADDR:MASTER_PORT is the
coordinator, `rendezvous_timeout_s` its timeout), a one-axis mesh with one device
per process, and the step under `jax.shard_map`: each rank runs its own batch,
and `jax.lax.pmean` averages the gradients (as DDP's all-reduce), the BatchNorm
statistics (as DDP's buffer broadcast, they stay identical on every rank) and the
loss over the ranks. CPU collectives go through gloo, NCCL on GPUs.

`compile` is XLA on or off, as DLPerf's and TensorFlow's switch: on, the whole
training step (forward, backward, all-reduce, optimizer) is one `jax.jit`
program that XLA fuses; off, the same Python step runs un-jitted, op by op, each
primitive dispatched as its own small XLA computation (JAX's eager mode, like
PyTorch eager or TensorFlow without jit_compile). AMP is Flax's mixed precision:
bfloat16 compute, float32 master weights and optimizer state.
"""
import importlib.util
import os

import numpy as np

import jax
import jax.numpy as jnp
import flax
import jaxlib
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from frameworks.common import harness
from frameworks.jax import models

AXIS = "data"


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


class JaxSession(harness.Session):
    framework_version = jax.__version__

    def __init__(self, spec, dist):
        self.dist = dist
        opts = spec.get("options") or {}
        device = spec.get("device", "auto")
        # Everything below must precede the first backend use (jax.devices() and friends).
        if opts.get("xla_flags"):
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {opts['xla_flags']}".strip()
        if device == "cpu":
            jax.config.update("jax_platforms", "cpu")
        if opts.get("cpu_collectives"):
            jax.config.update("jax_cpu_collectives_implementation", opts["cpu_collectives"])
        gpu = device != "cpu" and _cuda_plugin_installed()
        if dist.distributed:
            jax.distributed.initialize(
                coordinator_address=f"{dist.master_addr}:{dist.master_port}",
                num_processes=dist.world_size, process_id=dist.rank,
                local_device_ids=[dist.local_rank] if gpu else None,
                initialization_timeout=int(spec.get("rendezvous_timeout_s", 300)))
        self.platform = jax.default_backend()
        if device == "cuda" and self.platform != "gpu":
            raise RuntimeError(f"device=cuda asked for, but JAX's backend is {self.platform!r}")
        if dist.distributed:
            devices = jax.devices()
            if len(devices) != dist.world_size:
                raise RuntimeError(f"expected one device per rank, JAX sees {len(devices)} devices "
                                   f"for {dist.world_size} ranks")
        else:
            local = jax.local_devices()
            devices = [local[dist.local_rank % len(local)]]
        self.device = [d for d in devices if d.process_index == jax.process_index()][0]
        self.mesh = Mesh(np.array(devices), (AXIS,))
        replicated = NamedSharding(self.mesh, P())
        sharded = NamedSharding(self.mesh, P(AXIS))

        cfg = spec["model"]
        self.amp = spec["precision"] == "amp"
        if self.amp and self.platform == "gpu" and spec.get("amp_dtype") == "fp16":
            raise NotImplementedError("JAX AMP runs bfloat16 only: fp16 needs loss scaling, which "
                                      "neither JAX nor Optax provides (use amp_dtype=bf16)")
        dtype = jnp.bfloat16 if self.amp else jnp.float32  # CPUs run bf16, as PyTorch's autocast
        self.amp_dtype = "bf16" if self.amp else None
        seed = spec.get("seed", 0)
        model, loss_of = models.build_model(cfg, dtype)
        inputs, labels = models.synthetic_batch(cfg, spec["batch_size"], seed + dist.rank)
        # The synthetic batch, made once on the device: this rank's rows of a global batch.
        put = lambda a: jax.make_array_from_process_local_data(sharded, a)
        self.inputs = tuple(map(put, inputs))
        self.labels = tuple(map(put, labels))
        # Same seed, same weights on every rank; jitted, as op-by-op init is slow.
        variables = jax.jit(lambda: models.init_variables(model, inputs, seed))()
        params = variables["params"]
        stats = variables.get("batch_stats", {})
        tx = models.build_optimizer(cfg)
        state = (params, stats, tx.init(params), jnp.zeros((), jnp.uint32))
        self.state = jax.device_put(state, replicated)
        dropout_key = jax.random.PRNGKey(seed + 1)
        world = dist.world_size

        def local_step(state, inputs, labels):
            params, stats, opt_state, step = state
            rng = jax.random.fold_in(dropout_key, step)
            if world > 1:  # every rank its own dropout masks
                rng = jax.random.fold_in(rng, jax.lax.axis_index(AXIS))

            def loss_fn(p):
                variables = {"params": p, "batch_stats": stats} if stats else {"params": p}
                out, mutated = model.apply(variables, *inputs, train=True, rngs={"dropout": rng},
                                           mutable=["batch_stats"])
                return loss_of(out, *labels), mutated.get("batch_stats", {})

            (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            if world > 1:
                grads, new_stats, loss = jax.lax.pmean((grads, new_stats, loss), AXIS)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), new_stats, opt_state, step + 1), loss

        step_fn = local_step
        if world > 1:
            step_fn = jax.shard_map(local_step, mesh=self.mesh, in_specs=(P(), P(AXIS), P(AXIS)),
                                    out_specs=(P(), P()))
        else:
            # One process: the batch is whole on its device; run the step as is.
            self.inputs = tuple(a.addressable_data(0) for a in self.inputs)
            self.labels = tuple(a.addressable_data(0) for a in self.labels)
            self.state = jax.device_put(state, self.device)
        self.compile = bool(spec.get("compile"))
        self.step_fn = jax.jit(step_fn, donate_argnums=0) if self.compile else step_fn
        self._last = None

    def step(self):
        self.state, loss = self.step_fn(self.state, self.inputs, self.labels)
        self._last = loss
        return loss

    def loss_value(self, handle):
        return float(handle.addressable_data(0))

    def sync(self):
        jax.block_until_ready((self.state, self._last))

    def barrier(self):
        if self.dist.distributed:
            from jax.experimental import multihost_utils
            multihost_utils.sync_global_devices("dlbench barrier")

    def environment(self):
        env = {"device": self.device.device_kind, "device_count": jax.local_device_count(),
               "global_device_count": jax.device_count(), "platform": self.platform,
               "jaxlib": jaxlib.__version__,
               "flax": flax.__version__, "optax": optax.__version__,
               "jit": self.compile, "amp_dtype": self.amp_dtype,
               "xla_flags": os.environ.get("XLA_FLAGS")}
        if self.dist.distributed:
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

    def is_oom(self, exc):
        text = str(exc)
        return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in text \
            or "Out of memory" in text

    def close(self):
        if self.dist.distributed:
            jax.distributed.shutdown()


build = JaxSession

if __name__ == "__main__":
    raise SystemExit(harness.main(build=JaxSession))
