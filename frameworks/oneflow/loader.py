"""OneFlow's input pipeline for data=files: `oneflow.utils.data.DataLoader` (OneFlow's
counterpart of PyTorch's) with `data.workers` worker processes; in the workers, decode,
RandomResizedCrop and flip (PIL: frameworks/common/datafiles.py's Samples, the same
samples and augmentation as PyTorch's loader); uint8 batches normalized on the device,
then placed as the step takes them (nn.Graph over several ranks: the global view, each
rank's batch a split). BERT reads its .npz shard through the same DataLoader. A file that
cannot be decoded fails the rank with the file named.

OneFlow's own ImageNet path, OFRecord files read by flow.nn.OFRecordReader, needs the
images converted to OFRecord first; this reads the JPEG folder as it is.

oneflow is imported when a Loader is made, not with this module: importing it joins the
process group (frameworks/oneflow/worker.py), which the harness's checks come before.
"""
from frameworks.common import datafiles, pipeline


class Loader:
    def __init__(self, spec, dist, device, place=lambda ts: ts):  # place: the session's to_batch
        import oneflow as flow
        self.flow = flow
        data = datafiles.settings(spec, dist)
        self.samples = datafiles.Samples(spec, data)
        ids = datafiles.shard(len(self.samples), dist.rank, dist.world_size)
        keys = datafiles.KeyBatches(ids, spec.batch_size, spec.seed)
        self.batches = iter(flow.utils.data.DataLoader(self.samples, batch_sampler=keys,
                                                       num_workers=data["workers"]))
        self.device, self.place, self.seen = device, place, datafiles.Seen()
        self.mean = flow.tensor(datafiles.MEAN, device=device).reshape(1, 3, 1, 1) * 255
        self.std = flow.tensor(datafiles.STD, device=device).reshape(1, 3, 1, 1) * 255

    def next(self):
        fields = next(self.batches)
        inputs, labels = self.samples.take(fields, self.seen)
        inputs = tuple(t.to(self.device) for t in inputs)
        labels = tuple(t.to(self.device) for t in labels)
        if self.samples.images:
            inputs = ((inputs[0].to(self.flow.float32) - self.mean) / self.std,)
        return self.place(inputs), self.place(labels)


class InputSession(pipeline.PipelineSession):
    """bench=input: the pipeline alone, each step one batch onto the device."""

    def make_loader(self, spec, dist):
        import oneflow as flow
        self.framework_version = flow.__version__
        return Loader(spec, dist, flow.device("cpu"))
