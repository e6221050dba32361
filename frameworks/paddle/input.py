"""bench=input for PaddlePaddle: the paddle.io.DataLoader of data=files alone, no model
(frameworks/paddle/loader.py; docs/data.md)."""
from frameworks.paddle.loader import InputSession


def build(spec, dist):
    return InputSession(spec, dist)


build.data_backends = ("paddle.io",)
