"""JAX's input pipeline for data=files, with grain (Google's data loader for JAX, as the
Flax/MaxText examples read): a `grain.MapDataset` over the rank's stream of samples, a
`map` that decodes, crops and flips with PIL (frameworks/common/datafiles.py's Samples,
the same samples and augmentation as the DataLoader pipelines), `batch`, and
`mp_prefetch` with `data.workers` worker processes (0: read in the rank's own process).
uint8 NHWC batches are normalized on the device by one jitted function; the jitted
training step takes each batch as its arguments, so a new batch does not retrace it. BERT
reads its .npz rows through the same map/batch. A file that cannot be decoded fails the
rank with the file named.
"""
import gc

import numpy as np

import grain
import jax
import jax.numpy as jnp
from absl import flags

from frameworks.common import datafiles, pipeline

# grain reads its settings from absl flags; a program that is not an absl app must mark
# them parsed (their defaults) before grain's workers read them.
if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()


class Stream:
    """Position j of the rank's endless stream -> its sample, read (in a grain worker).
    The stream is datafiles.batches' order flattened: epoch j // n of the shard, reshuffled
    with (seed, epoch), at place j % n; j is also the sample's serial (its augmentation's
    draw), so the samples are those of KeyBatches, whichever worker reads them."""

    def __init__(self, samples, ids, seed):
        if not ids:
            raise datafiles.CorruptFile("this rank's shard is empty: fewer samples than ranks")
        self.samples, self.ids, self.seed = samples, ids, seed
        self._epoch, self._order = None, None  # the last epoch's order, per worker

    def __call__(self, j):
        j = int(j)
        epoch, place = divmod(j, len(self.ids))
        if epoch != self._epoch:
            self._epoch, self._order = epoch, datafiles.epoch_order(self.ids, self.seed, epoch)
        return self.samples[(self._order[place], j)]


class Loader:
    def __init__(self, spec, dist, put):
        """`put`: a numpy batch field -> a device array (the session's placement)."""
        data = datafiles.settings(spec, dist)
        self.samples = datafiles.Samples(spec, data, chw=False)  # NHWC, JAX's layout
        ids = datafiles.shard(len(self.samples), dist.rank, dist.world_size)
        stream = grain.MapDataset.range(0, 2 ** 62).map(Stream(self.samples, ids, spec.seed))
        ds = stream.batch(spec.batch_size, drop_remainder=True).to_iter_dataset(
            grain.ReadOptions(num_threads=0, prefetch_buffer_size=0))
        if data["workers"] > 0:
            ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=data["workers"]))
        self.batches = iter(ds)
        self.put, self.seen = put, datafiles.Seen()
        mean = jnp.asarray(datafiles.MEAN, jnp.float32) * 255
        std = jnp.asarray(datafiles.STD, jnp.float32) * 255
        self.normalize = jax.jit(lambda x: (x.astype(jnp.float32) - mean) / std)

    def next(self):
        # Copied out of grain's shared memory: the batch outlives the worker's buffer.
        fields = [np.array(f) for f in next(self.batches)]
        inputs, labels = self.samples.take(fields, self.seen)
        if self.samples.images:
            inputs = (self.normalize(self.put(inputs[0])),)
        else:
            inputs = tuple(self.put(a.astype(np.int32)) for a in inputs)
        return inputs, tuple(self.put(a.astype(np.int32)) for a in labels)

    def close(self):
        # Stops grain's worker processes, and lets go of its iterators now: their __del__
        # at interpreter exit, with grain's modules gone, prints tracebacks.
        batches, self.batches = self.batches, None
        if batches is not None:
            batches.close()
            del batches
            gc.collect()


class InputSession(pipeline.PipelineSession):
    """bench=input: the pipeline alone, each step one batch onto the device."""

    framework_version = jax.__version__

    def make_loader(self, spec, dist):
        if spec.device == "cpu":
            jax.config.update("jax_platforms", "cpu")
        local = jax.local_devices()
        self.device = local[dist.local_rank % len(local)]
        return Loader(spec, dist, lambda a: jax.device_put(a, self.device))

    def sync(self):
        jax.block_until_ready(self.last)  # JAX dispatches asynchronously

    def environment(self):
        return {"device": self.device.device_kind, "device_count": 1,
                "jax_backend": jax.default_backend(), "grain": grain.__version__}

    def close(self):
        self.loader.close()
