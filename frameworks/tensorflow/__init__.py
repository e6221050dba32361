"""TensorFlow with Keras (docs/frameworks/tensorflow.md): the training session (worker.py),
tf.data's data=files pipeline (loader.py) and profile=true's trace (tracer.py). This package
is named `tensorflow`: only the repository root may be on sys.path (worker.py says why)."""
from frameworks.registry import Adapter, Bench, Modes, Precision

ADAPTER = Adapter(
    "tensorflow",
    {"train": Bench(".worker:TFSession", files=".worker:TFFilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:TFSession.is_oom",
    data_backends=("tf.data",),
    import_name="tensorflow",
    modes=Modes("tf.function", "xla", auto=False),
    precision=Precision(),
    tracer=".tracer:trace",
    layouts=False,
    package=__name__)
