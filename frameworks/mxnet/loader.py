"""MXNet's input pipeline for data=files, as GluonCV's ImageNet scripts read a folder of
JPEGs: a gluon `DataLoader` with `data.workers` workers (threads) over a gluon Dataset
whose items are decoded by `mx.image.imdecode` (MXNet's own OpenCV), cropped and resized
by `mx.image.fixed_crop` at RandomResizedCrop's box (frameworks/common/datafiles.py:
crop_box, the same draw as every framework's) and flipped; batches normalized on the
device. BERT reads its .npz shard through the same DataLoader. Which samples a rank
reads, and in which order, is datafiles'. A file that cannot be decoded fails the rank
with the file named; OpenCV decodes a truncated JPEG without an error (the missing part
grey), so MXNet trains on such a file where the PIL- and TensorFlow-based loaders fail.
"""
import numpy as np
import mxnet as mx
from mxnet import gluon

from frameworks.common import datafiles, pipeline


class Items(gluon.data.Dataset):
    """key (sample id, serial) -> (*inputs, *labels, id, ok), numpy (the batchify stacks)."""

    def __init__(self, spec, data):
        cfg = spec.model
        self.images, self.seed = datafiles.images(cfg.name), spec.seed
        if self.images:
            self.paths, labels, _ = datafiles.image_files(data["path"])
            self.labels = [float(y % cfg["num_classes"]) for y in labels]
            self.size = cfg["image_size"]
        else:
            self.arrays = {k: v.astype(np.float32)  # Gluon's convention: ids as float32
                           for k, v in datafiles.load_bert(data["path"], cfg).items()}

    def __len__(self):
        return len(self.paths) if self.images else len(self.arrays["nsp_labels"])

    def decode(self, i, rng):
        with open(self.paths[i], "rb") as f:
            image = mx.image.imdecode(f.read(), flag=1, to_rgb=True)  # HWC uint8
        h, w = image.shape[:2]
        left, top, right, bottom = datafiles.crop_box(w, h, rng)
        image = mx.image.fixed_crop(image, left, top, right - left, bottom - top,
                                    size=(self.size, self.size), interp=1)  # bilinear
        if rng.random() < 0.5:
            image = mx.nd.flip(image, axis=1)
        return image.transpose((2, 0, 1)).asnumpy()

    def __getitem__(self, key):
        i, serial = (int(k) for k in key)
        if not self.images:
            return (*(self.arrays[k][i] for k in datafiles.BERT_INPUTS + datafiles.BERT_LABELS),
                    i, 1)
        try:
            return self.decode(i, datafiles.sample_rng(self.seed, i, serial)), self.labels[i], i, 1
        except Exception:  # noqa: BLE001  (MXNetError, OSError): named in the main process
            return np.zeros((3, self.size, self.size), np.uint8), 0.0, i, 0

    def check(self, ids, oks):
        for i, ok in zip(ids, oks):
            if not ok:
                try:
                    self.decode(int(i), datafiles.sample_rng(0, 0, 0))
                    why = "decoding failed in a loader worker"
                except Exception as exc:  # noqa: BLE001
                    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
                    why = f"{type(exc).__name__}: {lines[-1] if lines else ''}"  # MXNet's: last
                raise datafiles.CorruptFile(f"cannot decode {self.paths[int(i)]}: {why}")


class Loader:
    def __init__(self, spec, dist, ctx):
        data = datafiles.settings(spec, dist)
        self.items = Items(spec, data)
        ids = datafiles.shard(len(self.items), dist.rank, dist.world_size)
        keys = datafiles.KeyBatches(ids, spec.batch_size, spec.seed)
        # thread_pool: worker threads (imdecode and the crop run in MXNet's C++, GIL
        # released). Forked worker processes inherit MXNet's engine and the harness's
        # SIGTERM handler, and were seen to keep a finished rank from exiting.
        self.loader = gluon.data.DataLoader(self.items, batch_sampler=keys, thread_pool=True,
                                            num_workers=data["workers"])
        self.batches = iter(self.loader)
        self.ctx, self.seen = ctx, datafiles.Seen()
        self.mean = mx.nd.array(datafiles.MEAN, ctx=ctx).reshape((1, 3, 1, 1)) * 255
        self.std = mx.nd.array(datafiles.STD, ctx=ctx).reshape((1, 3, 1, 1)) * 255

    def next(self):
        fields = next(self.batches)
        ids, oks = fields[-2].asnumpy().tolist(), fields[-1].asnumpy().tolist()
        self.items.check(ids, oks)
        self.seen.add(int(i) for i in ids)
        n = 1 if self.items.images else len(datafiles.BERT_INPUTS)
        move = lambda t: t.as_in_context(self.ctx).astype("float32")  # noqa: E731
        inputs, labels = tuple(map(move, fields[:n])), tuple(map(move, fields[n:-2]))
        if self.items.images:
            inputs = ((inputs[0] - self.mean) / self.std,)
        return inputs, labels


class InputSession(pipeline.PipelineSession):
    """bench=input: the pipeline alone, each step one batch onto the device."""

    framework_version = mx.__version__

    def make_loader(self, spec, dist):
        return Loader(spec, dist, mx.cpu())

    def sync(self):
        mx.nd.waitall()  # the normalization is queued on MXNet's engine
