"""PaddlePaddle's input pipeline for data=files, as PaddleClas reads ImageNet:
`paddle.io.DataLoader` with `data.workers` worker processes (shared memory); in the
workers, decode, RandomResizedCrop and flip (PIL: frameworks/common/datafiles.py's
Samples, the same samples and augmentation as PyTorch's loader); uint8 batches normalized
on the device. BERT reads its .npz shard through the same DataLoader. A file that cannot
be decoded fails the rank with the file named.
"""
import paddle

from frameworks.common import datafiles, pipeline


class Loader:
    def __init__(self, spec, dist, gpu):
        data = datafiles.settings(spec, dist)
        self.samples = datafiles.Samples(spec, data)
        ids = datafiles.shard(len(self.samples), dist.rank, dist.world_size)
        keys = datafiles.KeyBatches(ids, spec.batch_size, spec.seed)
        self.batches = iter(paddle.io.DataLoader(self.samples, batch_sampler=keys,
                                                 num_workers=data["workers"], return_list=True))
        self.gpu, self.seen = gpu, datafiles.Seen()
        self.mean = paddle.to_tensor(datafiles.MEAN).reshape([1, 3, 1, 1]) * 255
        self.std = paddle.to_tensor(datafiles.STD).reshape([1, 3, 1, 1]) * 255

    def next(self):
        fields = next(self.batches)
        inputs, labels = self.samples.take(fields, self.seen)
        if self.gpu:
            inputs, labels = tuple(t.cuda() for t in inputs), tuple(t.cuda() for t in labels)
        if self.samples.images:
            inputs = ((inputs[0].astype("float32") - self.mean) / self.std,)
        return inputs, labels


class InputSession(pipeline.PipelineSession):
    """bench=input: the pipeline alone, each step one batch onto the device."""

    framework_version = paddle.__version__

    def make_loader(self, spec, dist):
        return Loader(spec, dist, gpu=False)
