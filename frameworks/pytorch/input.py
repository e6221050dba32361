"""bench=input for PyTorch: the data=files pipeline alone, no model (docs/data.md).

Each step takes the DataLoader's next batch onto the device and normalizes it, exactly
what a training step of data=files waits for (frameworks/pytorch/loader.py); the harness
times it with the training method, so its samples/s sit beside training's.
"""
import torch
import torch.distributed as torch_dist

from frameworks.common import harness
from frameworks.pytorch import loader
from frameworks.pytorch.session import setup_device


class InputSession(harness.Session):
    framework_version = torch.__version__

    def __init__(self, spec, dist):
        self.dist = dist
        self.device, self.cuda = setup_device(spec, dist)  # the barrier needs the group
        self.loader = loader.Loader(spec, dist, self.device)

    def step(self):
        inputs, _ = self.loader.next()
        return 0.0  # no model, no loss (the harness asks for one)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def barrier(self):
        if self.dist.distributed:
            torch_dist.barrier()

    def environment(self):
        return {"device": torch.cuda.get_device_name(self.device) if self.cuda else "cpu",
                "device_count": 1, "torch_threads": torch.get_num_threads()}

    def data_record(self):
        return self.loader.seen.record()

    def close(self):
        self.loader.close()
        if torch_dist.is_initialized():
            torch_dist.destroy_process_group()


def build(spec, dist):
    return InputSession(spec, dist)


build.data_backends = ("torch", "dali")
