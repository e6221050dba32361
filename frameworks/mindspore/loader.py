"""MindSpore's input pipeline for data=files, as model_zoo's ResNet reads ImageNet:
`mindspore.dataset` with the file bytes from a GeneratorDataset over the shared order
(frameworks/common/datafiles.py: each rank its shard, reshuffled each epoch, wrapping),
then a `map` of `vision.Decode(to_pil=True)`, `RandomResizedCrop` (area 8-100 %, aspect 3/4-4/3),
`RandomHorizontalFlip`, `Normalize` and `HWC2CHW` on `data.workers` parallel workers (at
least 1, MindSpore's minimum), then `batch`. The crop and flip draw from MindSpore's own
seeded generator, not the shared per-sample draw of the other loaders. BERT reads its .npz
rows through the same GeneratorDataset and batch. A file that cannot be decoded fails the
rank with the file named (the pipeline's error does not name it: the rank's shard is
decoded once more, with PIL, to find it). Decode runs with PIL (`to_pil=True`): MindSpore
2.10's own JPEG decoder killed the rank with SIGFPE on a truncated file, leaving no record.
"""
import numpy as np
import mindspore as ms
import mindspore.dataset as msds
from mindspore.dataset import vision

from frameworks.common import datafiles, pipeline


class Loader:
    def __init__(self, spec, dist):
        data = datafiles.settings(spec, dist)
        cfg, seed, batch = spec.model, spec.seed, spec.batch_size
        self.images = datafiles.images(cfg["name"])
        msds.config.set_seed(seed)
        if self.images:
            self.paths, labels, _ = datafiles.image_files(data["path"])
            labels = [y % cfg["num_classes"] for y in labels]
            n, columns = len(self.paths), ["image", "label", "id"]

            def row(i):
                with open(self.paths[i], "rb") as f:
                    raw = np.frombuffer(f.read(), np.uint8)
                return raw, np.int32(labels[i]), np.int64(i)
        else:
            arrays = {k: v.astype(np.int32) for k, v in datafiles.load_bert(data["path"], cfg).items()}
            columns = list(datafiles.BERT_INPUTS + datafiles.BERT_LABELS) + ["id"]
            n = len(arrays["nsp_labels"])

            def row(i):
                return (*(arrays[k][i] for k in columns[:-1]), np.int64(i))
        self.shard = datafiles.shard(n, dist.rank, dist.world_size)

        def rows():  # the shared order, endless
            for ids in datafiles.batches(self.shard, batch, seed):
                for i in ids:
                    yield row(i)
        ds = msds.GeneratorDataset(rows, column_names=columns, shuffle=False)
        if self.images:
            size = cfg["image_size"]
            ops = [vision.Decode(to_pil=True), vision.RandomResizedCrop(size, scale=(0.08, 1.0),
                                                             ratio=(3 / 4, 4 / 3)),
                   vision.RandomHorizontalFlip(),
                   vision.Normalize([m * 255 for m in datafiles.MEAN], [s * 255 for s in datafiles.STD]),
                   vision.HWC2CHW()]
            ds = ds.map(operations=ops, input_columns=["image"],
                        num_parallel_workers=max(1, data["workers"]))
        self.n_inputs = 1 if self.images else len(datafiles.BERT_INPUTS)
        self.batches = ds.batch(batch, drop_remainder=True).create_tuple_iterator(num_epochs=1)
        self.seen = datafiles.Seen()

    def next(self):
        try:
            fields = next(self.batches)
        except RuntimeError:
            self._name_the_corrupt_file()
            raise
        self.seen.add(fields[-1].asnumpy().tolist())
        return tuple(fields[:self.n_inputs]), tuple(fields[self.n_inputs:-1])

    def _name_the_corrupt_file(self):
        if not self.images:
            return
        import random
        for i in self.shard:
            try:
                datafiles.pil_image(self.paths[i], 8, random.Random(0))
            except Exception as exc:  # noqa: BLE001
                raise datafiles.CorruptFile(f"cannot decode {self.paths[i]}: "
                                            f"{type(exc).__name__}: {exc}") from None


class InputSession(pipeline.PipelineSession):
    """bench=input: the pipeline alone, each step one batch."""

    framework_version = ms.__version__

    def make_loader(self, spec, dist):
        ms.set_device("CPU")
        return Loader(spec, dist)
