"""TensorFlow's input pipeline for data=files, as TF Model Garden's ImageNet input reads:
tf.data with `read_file`, a random crop box (`stateless_sample_distorted_bounding_box`,
area 8-100%, aspect 3/4-4/3: RandomResizedCrop), `decode_and_crop_jpeg`, resize to the
model's size, flip and normalize in a `map` of `data.workers` parallel calls, then batch
and prefetch. BERT reads its .npz shard through the same map/batch/prefetch. Which samples
a rank reads, and in which order, is frameworks/common/datafiles.py's: the keys come from
its generator, so every framework's rank r reads the same samples.

A file that cannot be decoded fails the rank with the file named: tf.data's error does not
name it, so the rank's shard is decoded once more, in order, to find it.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # as worker.py: before tensorflow's import

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from frameworks.common import datafiles, pipeline  # noqa: E402


class Loader:
    def __init__(self, spec, dist):
        data = datafiles.settings(spec, dist)
        cfg, seed, batch = spec.model, spec.seed, spec.batch_size
        self.images = datafiles.images(cfg["name"])
        if self.images:
            paths, labels, _ = datafiles.image_files(data["path"])
            self.paths = paths
            n, load = len(paths), self._image_fn(paths, labels, cfg, seed)
        else:
            arrays = datafiles.load_bert(data["path"], cfg)
            n, load = len(arrays["nsp_labels"]), self._bert_fn(arrays)
        self.shard = datafiles.shard(n, dist.rank, dist.world_size)

        def keys():  # (sample id, serial): the shared order, wrapping at each epoch's end
            serial = 0
            for ids in datafiles.batches(self.shard, batch, seed):
                for i in ids:
                    yield i, serial
                    serial += 1
        key = tf.TensorSpec((), tf.int64)
        workers = data["workers"]
        ds = tf.data.Dataset.from_generator(keys, output_signature=(key, key))
        ds = ds.map(load, num_parallel_calls=workers or None, deterministic=True)
        ds = ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
        self.batches = iter(ds)
        self.seen = datafiles.Seen()

    @staticmethod
    def _image_fn(paths, labels, cfg, seed):
        size, classes = cfg["image_size"], cfg["num_classes"]
        paths_t = tf.constant(paths)
        labels_t = tf.constant([y % classes for y in labels], tf.int32)
        mean = tf.constant(datafiles.MEAN, tf.float32) * 255
        std = tf.constant(datafiles.STD, tf.float32) * 255
        whole = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4])

        def load(i, serial):
            raw = tf.io.read_file(tf.gather(paths_t, i))
            draw = tf.stack([tf.constant(seed, tf.int64), serial])
            begin, extent, _ = tf.image.stateless_sample_distorted_bounding_box(
                tf.io.extract_jpeg_shape(raw), whole, seed=draw, min_object_covered=0.0,
                aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
                use_image_if_no_bounding_boxes=True)
            window = tf.stack([begin[0], begin[1], extent[0], extent[1]])
            image = tf.io.decode_and_crop_jpeg(raw, window, channels=3)
            image = tf.image.resize(image, [size, size], method="bilinear")
            image = tf.image.stateless_random_flip_left_right(image, seed=draw + 1)
            return ((image - mean) / std,), (tf.gather(labels_t, i),), i
        return load

    @staticmethod
    def _bert_fn(arrays):
        tensors = {k: tf.constant(v.astype(np.int32)) for k, v in arrays.items()}

        def load(i, serial):
            row = lambda names: tuple(tf.gather(tensors[k], i) for k in names)  # noqa: E731
            return row(datafiles.BERT_INPUTS), row(datafiles.BERT_LABELS), i
        return load

    def next(self):
        try:
            inputs, labels, ids = next(self.batches)
        except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as exc:
            self._name_the_corrupt_file()
            raise exc
        self.seen.add(ids.numpy().tolist())
        return inputs, labels

    def _name_the_corrupt_file(self):
        if not self.images:
            return
        for i in self.shard:
            try:
                tf.io.decode_jpeg(tf.io.read_file(self.paths[i]), channels=3)
            except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as exc:
                first = str(exc.message).strip().splitlines()[0]
                raise datafiles.CorruptFile(f"cannot decode {self.paths[i]}: {first}") from None


class InputSession(pipeline.PipelineSession):
    """bench=input: the pipeline alone, each step one batch."""

    framework_version = tf.__version__

    def make_loader(self, spec, dist):
        return Loader(spec, dist)
