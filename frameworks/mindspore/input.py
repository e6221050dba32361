"""bench=input for MindSpore: the mindspore.dataset pipeline of data=files alone, no model
(frameworks/mindspore/loader.py; docs/data.md)."""
from frameworks.mindspore.loader import InputSession


def build(spec, dist):
    return InputSession(spec, dist)


build.data_backends = ("mindspore.dataset",)
