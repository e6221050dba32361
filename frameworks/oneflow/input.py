"""bench=input for OneFlow: the oneflow.utils.data.DataLoader of data=files alone, no model
(frameworks/oneflow/loader.py; docs/data.md)."""


def build(spec, dist):
    from frameworks.oneflow.loader import InputSession  # imports oneflow: one process group
    return InputSession(spec, dist)


build.data_backends = ("oneflow.utils.data",)
