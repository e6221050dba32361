"""bench=input for TensorFlow: the tf.data pipeline of data=files alone, no model
(frameworks/tensorflow/loader.py; docs/data.md)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from frameworks.tensorflow.loader import InputSession  # noqa: E402


def build(spec, dist):
    return InputSession(spec, dist)


build.data_backends = ("tf.data",)
