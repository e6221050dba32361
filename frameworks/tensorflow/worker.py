"""TensorFlow's training session (stdlib + numpy + tensorflow/keras; the adapter is
frameworks/tensorflow/__init__.py).

A custom training step: GradientTape inside a tf.function; `compile` turns on XLA
with `jit_compile=True` (off: a plain graph-mode tf.function, which `compile=auto`, the
default, picks as TF Model Garden trains: contract/modes.py). BERT's gradients
are clipped by global norm after the all-reduce (models.clipped). AMP is the Keras
mixed-precision policy: 'mixed_bfloat16' (float32 variables, bfloat16 compute) on
CPU; on a GPU the spec's amp_dtype picks 'mixed_bfloat16' or 'mixed_float16' with
a loss-scale optimizer. Data parallel over ranks with
tf.distribute.MultiWorkerMirroredStrategy (gRPC ring all-reduce on CPU, NCCL on
GPUs); its TF_CONFIG is built from the env contract:

- worker i listens on <host i>:(MASTER_PORT + 1 + i);
- <host i> comes from DLBENCH_RANK_HOSTS when set (comma-separated, one entry per
  rank or one per node), otherwise from a stdlib rendezvous on MASTER_ADDR:MASTER_PORT
  in which rank 0 learns the address each rank connects from (127.0.0.1 locally,
  the node's address on a cluster). That rendezvous is also what bounds the start
  with `spec.rendezvous_timeout_s`.

Do not run this directory as a script directory: it is named `tensorflow`, so only
the repository root may be on sys.path (as with `python -m frameworks`), else
`import tensorflow` would find this package instead of the library.
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # keep warnings and errors, drop INFO

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from frameworks.common import accelerator, capability, datafiles  # noqa: E402
from frameworks.common.session import Session  # noqa: E402
from contract import modes
from frameworks.common.rendezvous import rendezvous  # noqa: E402
from frameworks.tensorflow import models  # noqa: E402


# --- rendezvous and TF_CONFIG -----------------------------------------------------

def worker_hosts(dist, learned: list, env=os.environ) -> list:
    """One host per rank: DLBENCH_RANK_HOSTS (per rank or per node), else the learned ones."""
    given = [h.strip() for h in env.get("DLBENCH_RANK_HOSTS", "").split(",") if h.strip()]
    if not given:
        return list(learned)
    if len(given) == dist.world_size:
        return given
    nodes = dist.world_size // dist.local_world_size
    if len(given) == nodes:
        return [given[r // dist.local_world_size] for r in range(dist.world_size)]
    raise ValueError(f"DLBENCH_RANK_HOSTS has {len(given)} entries; expected {dist.world_size} "
                     f"(one per rank) or {nodes} (one per node)")


def tf_config(dist, hosts: list) -> dict:
    workers = [f"{hosts[r]}:{dist.master_port + 1 + r}" for r in range(dist.world_size)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": dist.rank}}


# --- the session ------------------------------------------------------------------

class TFSession(Session):
    framework_version = tf.__version__

    def __init__(self, spec, dist):
        self.dist = dist
        self._threads(spec.options)
        self._device(spec)
        self.strategy = self._strategy(spec, dist)
        self.replicas = self.strategy.num_replicas_in_sync
        # AMP: the Keras mixed-precision policy, set before any layer is made.
        self.amp = spec.precision == "amp"
        self.policy = {None: "float32", "bf16": "mixed_bfloat16",
                       "fp16": "mixed_float16"}[accelerator.amp_dtype(spec, self.gpu)]
        keras.mixed_precision.set_global_policy(self.policy)
        keras.utils.set_random_seed(spec.seed)  # same initial weights on every rank
        self._model(spec)
        self._step_fn(spec)
        self._barrier = self._barrier_fn() if dist.distributed else None
        self.last = None

    # -- construction helpers, in order

    def _threads(self, options):
        """intra-op threads: options.intra_op_threads, else OMP_NUM_THREADS (the local
        launcher shares the cores among ranks that way), else TensorFlow's default."""
        intra = options.get("intra_op_threads") or os.environ.get("OMP_NUM_THREADS")
        if intra:
            tf.config.threading.set_intra_op_parallelism_threads(int(intra))
        inter = options.get("inter_op_threads")
        if inter:
            tf.config.threading.set_inter_op_parallelism_threads(int(inter))

    def _device(self, spec):
        """One GPU per rank, set before the runtime starts, or the CPU."""
        gpus = tf.config.list_physical_devices("GPU")
        self.gpu = accelerator.use_gpu(spec, len(gpus), "TensorFlow", f"tensorflow {tf.__version__}, "
                                       f"CUDA build: {tf.test.is_built_with_cuda()}")
        mine = gpus[self.dist.local_rank % len(gpus)] if self.gpu else None
        capability.require("tensorflow", spec, tuple(tf.config.experimental.get_device_details(
            mine).get("compute_capability") or ()) if self.gpu else None)
        if self.gpu:
            tf.config.set_visible_devices([mine], "GPU")
            tf.config.experimental.set_memory_growth(mine, True)
        elif gpus:
            tf.config.set_visible_devices([], "GPU")
        self.device = "/GPU:0" if self.gpu else "/CPU:0"

    def _model(self, spec):
        """The model, its loss and optimizer under the strategy; the synthetic batch made
        once, on the device."""
        cfg = self.cfg = spec.model
        with self.strategy.scope():
            self.model, self.loss_fn = models.build_model(cfg)
            self.optimizer, self.l2 = models.build_optimizer(cfg)
            if self.policy == "mixed_float16":
                self.optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
            self.variables = self.model.trainable_variables
            self.optimizer.build(self.variables)  # slots now, not inside the traced step
        with tf.device(self.device):
            inputs, labels = models.synthetic_batch(cfg, spec.batch_size, spec.seed + self.dist.rank)
            self.inputs = tuple(tf.constant(a) for a in inputs)
            self.labels = tuple(tf.constant(a) for a in labels)

    def _step_fn(self, spec):
        """The step as a tf.function: under XLA whole (jit_scope=step) or its gradients only
        (grads: XLA cannot compile MWMS collectives), or a plain graph without compile."""
        self.jit = bool(spec.compile)
        jit_all = spec.options.get("jit_scope", "auto")
        if jit_all == "auto":
            jit_all = "step" if self.dist.world_size == 1 else "grads"
        if jit_all not in ("step", "grads"):
            raise ValueError(f"options.jit_scope must be auto, step or grads, got {jit_all!r}")
        self.jit_scope = jit_all if self.jit else None
        grads_fn = self._grads
        if self.jit and jit_all == "grads":
            grads_fn = tf.function(self._grads, jit_compile=True)

        def replica_step(inputs, labels):
            loss, grads = grads_fn(inputs, labels)
            self.optimizer.apply_gradients(zip(grads, self.variables))  # all-reduces (sum)
            return loss

        def step(inputs, labels):
            per_replica = self.strategy.run(replica_step, args=(inputs, labels))
            return self.strategy.experimental_local_results(per_replica)[0]

        self._step = tf.function(step, jit_compile=self.jit and jit_all == "step")

    def _barrier_fn(self):
        """A barrier of the ranks: an all-reduce of one number."""
        def barrier():
            ctx = lambda: tf.distribute.get_replica_context().all_reduce(  # noqa: E731
                tf.distribute.ReduceOp.SUM, tf.ones([]))
            return self.strategy.experimental_local_results(self.strategy.run(ctx))[0]
        return tf.function(barrier)

    def _strategy(self, spec, dist):
        if not dist.distributed:
            return tf.distribute.get_strategy()  # the default (no-op) strategy
        timeout = float(spec.rendezvous_timeout_s)
        hosts = worker_hosts(dist, rendezvous(dist, timeout))
        os.environ["TF_CONFIG"] = json.dumps(tf_config(dist, hosts))
        self.tf_config = os.environ["TF_CONFIG"]
        # MWMS waits for its peers with a dummy all-reduce whose timeout is this class
        # attribute (0 = forever by default): bound it by the rendezvous timeout too.
        from tensorflow.python.distribute import collective_all_reduce_strategy as cars
        cars.CollectiveAllReduceExtended._check_health_initial_timeout = int(timeout)
        impl = tf.distribute.experimental.CommunicationImplementation
        impl = impl.NCCL if self.gpu else impl.RING  # RING: gRPC ring all-reduce on CPU
        self.communication = impl.name
        return tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=impl))

    # -- the step

    def _grads(self, inputs, labels):
        with tf.GradientTape() as tape:
            # A one-input model (ResNet) takes its tensor; BERT takes the tuple.
            outputs = self.model(inputs[0] if len(inputs) == 1 else inputs, training=True)
            loss = self.loss_fn(outputs, *labels)
            # The optimizer sums gradients over replicas: scale for their mean (as DDP).
            scaled = loss / self.replicas
            if self.policy == "mixed_float16":
                scaled = self.optimizer.scale_loss(scaled)
        grads = tape.gradient(scaled, self.variables)
        # Embedding lookups give IndexedSlices; the tied word matrix mixes both kinds.
        grads = [tf.convert_to_tensor(g) for g in grads]
        if self.l2:  # PyTorch SGD's coupled weight decay (divided and scaled like the loss)
            l2 = self.l2 / self.replicas
            if self.policy == "mixed_float16":
                l2 = self.optimizer.scale_loss(tf.constant(l2, tf.float32))
            grads = [g + tf.cast(l2, g.dtype) * tf.cast(v, g.dtype)
                     for g, v in zip(grads, self.variables)]
        return loss, grads

    def step(self):
        self.last = self._step(self.inputs, self.labels)
        return self.last

    def loss_value(self, handle):
        return float(handle.numpy())

    def sync(self):
        if self.gpu and self.last is not None:
            # Reading the step counter waits for the last update on the device.
            self.optimizer.iterations.numpy()
            self.last.numpy()

    def barrier(self):
        if self._barrier is not None:
            self._barrier().numpy()

    def environment(self):
        env = {"device": "cpu", "device_count": 1, "keras": keras.__version__,
               "numpy": np.__version__, "policy": self.policy, "jit_compile": self.jit,
               "jit_scope": self.jit_scope,
               "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
               "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
               "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
               "strategy": "MultiWorkerMirroredStrategy" if self.dist.distributed else "default",
               "replicas": self.replicas, **modes.recipe_environment(self.cfg)}
        if self.dist.distributed:
            env["tf_config"] = json.loads(self.tf_config)
            env["communication"] = self.communication
        build = tf.sysconfig.get_build_info()
        if self.gpu:
            details = tf.config.experimental.get_device_details(
                tf.config.get_visible_devices("GPU")[0])
            env.update(device=details.get("device_name", "gpu"),
                       device_count=len(tf.config.list_physical_devices("GPU")),
                       cuda=build.get("cuda_version"), cudnn=build.get("cudnn_version"))
        return env

    def peak_device_bytes(self):
        if not self.gpu:
            return None
        return tf.config.experimental.get_memory_info("GPU:0")["peak"]

    @staticmethod
    def is_oom(exc):
        return isinstance(exc, (tf.errors.ResourceExhaustedError, MemoryError))

    def parameter_checksum(self) -> float:
        """Sum of |w| over the trainable weights (float64): equal on every rank when the
        ranks' updates were all-reduced (the harness records it)."""
        return float(sum(np.abs(np.asarray(v.numpy(), dtype=np.float64)).sum()
                         for v in self.variables))


class TFFilesSession(datafiles.FromLoader, TFSession):
    """data=files: each step takes the tf.data pipeline's next batch (frameworks/tensorflow/loader.py)."""

    def __init__(self, spec, dist):
        super().__init__(spec, dist)
        from frameworks.tensorflow import loader
        self.loader = loader.Loader(spec, dist)

    def step(self):
        inputs, labels = self.loader.next()
        self.last = self._step(inputs, labels)
        return self.last
