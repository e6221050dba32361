"""bench=input for MXNet: the gluon DataLoader of data=files alone, no model
(frameworks/mxnet/loader.py; docs/data.md)."""
from frameworks.mxnet.loader import InputSession


def build(spec, dist):
    return InputSession(spec, dist)


build.data_backends = ("gluon",)
