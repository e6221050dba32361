"""PyTorch's input pipeline for data=files, as PyTorch's ImageNet example and NVIDIA's
DeepLearningExamples (`--data-backend pytorch`) read: a DataLoader with `data.workers`
worker processes and pinned memory on a GPU; in the workers, decode (PIL),
RandomResizedCrop to the model's image size and a horizontal flip; uint8 batches,
normalized with ImageNet's mean and std on the device. BERT reads its .npz shard through
the same DataLoader. Which samples a rank reads, in which order, and their decoding (PIL) are
frameworks/common/datafiles.py's (Samples), shared with the other PIL-based loaders.

torchvision is not used: PyPI has only CUDA builds of it for torch 2.13, which do not
import beside the CPU torch here; its RandomResizedCrop's algorithm is datafiles.crop_box.
A file that cannot be decoded fails the rank with the file named (docs/data.md says why).

bench=input is the pipeline alone, no model (InputSession): each step takes the DataLoader's
next batch onto the device and normalizes it, exactly what a training step of data=files
waits for; the harness times it with the training method, so its samples/s sit beside
training's.
"""
import torch
import torch.distributed as torch_dist
from torch.utils.data import DataLoader

from frameworks.common import capability, datafiles, pipeline
from frameworks.pytorch.session import TorchSession, setup_device


class Loader:
    """This rank's batches from the files, on the device, with the sample ids it read."""

    def __init__(self, spec, dist, device, channels_last=False):
        data = datafiles.settings(spec, dist)
        if data["backend"] == "dali":
            raise capability.Unsupported(
                "data.backend=dali needs NVIDIA DALI and a GPU: DALI is not installed here "
                "(its wheels come from NVIDIA's package index, for CUDA machines)")
        self.samples = datafiles.Samples(spec, data)
        self.device, self.channels_last = device, channels_last
        ids = datafiles.shard(len(self.samples), dist.rank, dist.world_size)
        workers = data["workers"]
        keys = datafiles.KeyBatches(ids, spec.batch_size, spec.seed)
        self.loader = DataLoader(self.samples, batch_sampler=keys, num_workers=workers,
                                 pin_memory=device.type == "cuda",
                                 prefetch_factor=2 if workers else None)
        self.batches = iter(self.loader)
        self.seen = datafiles.Seen()
        self.mean = torch.tensor(datafiles.MEAN, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(datafiles.STD, device=device).view(1, 3, 1, 1) * 255

    def next(self):
        """(inputs, labels) of the next batch, on the device, as the model takes them."""
        fields = next(self.batches)
        inputs, labels = self.samples.take(fields, self.seen)
        move = lambda t: t.to(self.device, non_blocking=True)  # noqa: E731
        inputs, labels = tuple(map(move, inputs)), tuple(map(move, labels))
        if not self.samples.images:
            return inputs, labels
        x = (inputs[0].float() - self.mean) / self.std
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return (x,), labels

    def close(self):
        # Ends the worker processes now rather than at interpreter exit (which os._exit skips).
        shutdown = getattr(self.batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


class FilesSession(datafiles.FromLoader, TorchSession):
    """Training from files: each step takes the loader's next batch (the wait for it is
    inside the timed step, as in a real training loop), then trains as on synthetic data."""

    def __init__(self, spec, dist):
        super().__init__(spec, dist)
        self.loader = Loader(spec, dist, self.device, self.channels_last)

    def synthetic_batch(self, cfg, batch_size, seed):
        return None, None  # each step reads its own

    def close(self):
        self.loader.close()
        super().close()


class InputSession(pipeline.PipelineSession):
    """bench=input (module docstring)."""
    framework_version = TorchSession.framework_version
    # The device's side is a training session's: the same sync, barrier, timer, environment.
    sync, barrier, timer = TorchSession.sync, TorchSession.barrier, TorchSession.timer
    environment, peak_device_bytes = TorchSession.environment, TorchSession.peak_device_bytes
    recipe, amp_name = TorchSession.recipe, TorchSession.amp_name   # bench=input runs no autocast

    def make_loader(self, spec, dist):
        self.dist = dist
        self.device, self.cuda = setup_device(spec, dist)  # the barrier needs the group
        return Loader(spec, dist, self.device)

    def close(self):
        self.loader.close()
        if torch_dist.is_initialized():
            torch_dist.destroy_process_group()
