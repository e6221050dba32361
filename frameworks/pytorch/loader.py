"""PyTorch's input pipeline for data=files, as PyTorch's ImageNet example and NVIDIA's
DeepLearningExamples (`--data-backend pytorch`) read: a DataLoader with `data.workers`
worker processes and pinned memory on a GPU; in the workers, decode (PIL),
RandomResizedCrop to the model's image size and a horizontal flip; uint8 batches,
normalized with ImageNet's mean and std on the device. BERT reads its .npz shard through
the same DataLoader. Which samples a rank reads, and in which order, is
frameworks/common/datafiles.py's.

torchvision is not used: PyPI has only CUDA builds of it for torch 2.13, which do not
import beside the CPU torch here; its RandomResizedCrop's algorithm is datafiles.crop_box.
A file that cannot be decoded fails the rank with the file named (docs/data.md says why).
"""
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from frameworks.common import capability, datafiles
from frameworks.pytorch.session import TorchSession


class Images(Dataset):
    """ImageNet's folder: a key (sample id, serial) -> (uint8 CHW image, label, id, error)."""

    def __init__(self, paths, labels, size, num_classes, seed):
        self.paths, self.labels = paths, [y % num_classes for y in labels]
        self.size, self.seed = size, seed

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, key):
        from PIL import Image
        i, serial = key
        rng = datafiles.sample_rng(self.seed, i, serial)
        try:
            with Image.open(self.paths[i]) as im:
                im = im.convert("RGB")
                box = datafiles.crop_box(im.width, im.height, rng)
                im = im.resize((self.size, self.size), Image.BILINEAR, box=box)
        except Exception as exc:  # noqa: BLE001  (PIL raises OSError, SyntaxError, ValueError...)
            # Carried to the main process as data, so that the error names the file however
            # many workers there are (an exception raised here arrives wrapped in a traceback).
            blank = torch.zeros((3, self.size, self.size), dtype=torch.uint8)
            return blank, -1, i, f"cannot decode {self.paths[i]}: {type(exc).__name__}: {exc}"
        if rng.random() < 0.5:
            im = im.transpose(Image.FLIP_LEFT_RIGHT)
        pixels = torch.from_numpy(np.asarray(im, dtype=np.uint8).copy()).permute(2, 0, 1)
        return pixels.contiguous(), self.labels[i], i, ""


class Sequences(Dataset):
    """A BERT shard: a key (sample id, serial) -> (inputs, labels, id, error)."""

    def __init__(self, arrays):
        self.arrays = {k: torch.from_numpy(v.astype(np.int64)) for k, v in arrays.items()}

    def __len__(self):
        return len(self.arrays["nsp_labels"])

    def __getitem__(self, key):
        i, _ = key
        row = lambda names: tuple(self.arrays[k][i] for k in names)  # noqa: E731
        return row(datafiles.BERT_INPUTS), row(datafiles.BERT_LABELS), i, ""


class KeyBatches:
    """The rank's endless batches of (sample id, serial) keys (datafiles.batches)."""

    def __init__(self, ids, batch_size, seed):
        self.ids, self.batch_size, self.seed = ids, batch_size, seed

    def __iter__(self):
        serial = 0
        for batch in datafiles.batches(self.ids, self.batch_size, self.seed):
            yield [(i, serial + k) for k, i in enumerate(batch)]
            serial += len(batch)


class Loader:
    """This rank's batches from the files, on the device, with the sample ids it read."""

    def __init__(self, spec, dist, device, channels_last=False):
        data = datafiles.settings(spec, dist)
        if data["backend"] == "dali":
            raise capability.Unsupported(
                "data.backend=dali needs NVIDIA DALI and a GPU: DALI is not installed here "
                "(its wheels come from NVIDIA's package index, for CUDA machines)")
        cfg, seed = spec["model"], spec["seed"]
        if cfg["name"] == "resnet50":
            paths, labels, _ = datafiles.image_files(data["path"])
            dataset = Images(paths, labels, cfg["image_size"], cfg["num_classes"], seed)
        else:
            dataset = Sequences(datafiles.load_bert(data["path"], cfg))
        self.images = cfg["name"] == "resnet50"
        self.device, self.channels_last = device, channels_last
        cuda = device.type == "cuda"
        ids = datafiles.shard(len(dataset), dist.rank, dist.world_size)
        workers = data["workers"]
        self.loader = DataLoader(dataset, batch_sampler=KeyBatches(ids, spec["batch_size"], seed),
                                 num_workers=workers, pin_memory=cuda,
                                 prefetch_factor=2 if workers else None)
        self.batches = iter(self.loader)
        self.seen = datafiles.Seen()
        self.mean = torch.tensor(datafiles.MEAN, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(datafiles.STD, device=device).view(1, 3, 1, 1) * 255

    def next(self):
        """(inputs, labels) of the next batch, on the device, as the model takes them."""
        x, y, ids, errors = next(self.batches)
        bad = next((e for e in errors if e), None)
        if bad:
            raise datafiles.CorruptFile(bad)
        self.seen.add(ids.tolist())
        move = lambda t: t.to(self.device, non_blocking=True)  # noqa: E731
        if not self.images:
            return tuple(map(move, x)), tuple(map(move, y))
        x = (move(x).float() - self.mean) / self.std
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return (x,), (move(y),)

    def close(self):
        # Ends the worker processes now rather than at interpreter exit (which os._exit skips).
        shutdown = getattr(self.batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


class FilesSession(TorchSession):
    """Training from files: each step takes the loader's next batch (the wait for it is
    inside the timed step, as in a real training loop), then trains as on synthetic data."""

    def __init__(self, spec, dist):
        super().__init__(spec, dist)
        self.loader = Loader(spec, dist, self.device, self.channels_last)

    def synthetic_batch(self, cfg, batch_size, seed):
        return None, None  # each step reads its own

    def step(self):
        self.inputs, self.labels = self.loader.next()
        return super().step()

    def data_record(self):
        return self.loader.seen.record()

    def close(self):
        self.loader.close()
        super().close()
