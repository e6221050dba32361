"""bench=input for PyTorch: the data=files pipeline alone, no model (docs/data.md).

Each step takes the DataLoader's next batch onto the device and normalizes it, exactly
what a training step of data=files waits for (frameworks/pytorch/loader.py); the harness
times it with the training method, so its samples/s sit beside training's.
"""
import torch.distributed as torch_dist

from frameworks.common import pipeline
from frameworks.pytorch import loader
from frameworks.pytorch.session import TorchSession, setup_device


class InputSession(pipeline.PipelineSession):
    framework_version = TorchSession.framework_version
    # The device's side is a training session's: the same sync, barrier, timer, environment.
    sync, barrier, timer = TorchSession.sync, TorchSession.barrier, TorchSession.timer
    environment, peak_device_bytes = TorchSession.environment, TorchSession.peak_device_bytes

    def make_loader(self, spec, dist):
        self.dist = dist
        self.device, self.cuda = setup_device(spec, dist)  # the barrier needs the group
        return loader.Loader(spec, dist, self.device)

    def close(self):
        self.loader.close()
        if torch_dist.is_initialized():
            torch_dist.destroy_process_group()


def build(spec, dist):
    return InputSession(spec, dist)


build.data_backends = ("torch", "dali")
