"""bench=input: a framework's input pipeline alone, no model (docs/data.md). Each framework's
loader module subclasses PipelineSession with its own Loader (frameworks/<name>/loader.py)."""
from frameworks.common import datafiles
from frameworks.common.session import Session


class PipelineSession(datafiles.FromLoader, Session):
    """Each step takes the loader's next batch onto the device; no model, no loss."""

    def __init__(self, spec, dist):
        self.loader = self.make_loader(spec, dist)
        self.last = None

    def make_loader(self, spec, dist):
        raise NotImplementedError

    def step(self):
        self.last = self.loader.next()  # held, as a training step holds its batch, till the next
        return 0.0  # no loss (the harness asks for one)

    def environment(self):
        return {"device": "cpu", "device_count": 1}
