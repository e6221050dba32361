"""TensorFlow with Keras (docs/frameworks/tensorflow.md): the training session (worker.py)
and tf.data's data=files pipeline (loader.py). This package is named `tensorflow`: only the
repository root may be on sys.path (worker.py says why)."""
from frameworks.registry import Adapter, Bench

ADAPTER = Adapter(
    "tensorflow",
    {"train": Bench(".worker:TFSession", files=".worker:TFFilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:TFSession.is_oom",
    data_backends=("tf.data",),
    package=__name__)
