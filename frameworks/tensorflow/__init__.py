"""TensorFlow with Keras (docs/frameworks/tensorflow.md): the training session (worker.py),
tf.data's data=files pipeline (loader.py) and profile=true's trace (tracer.py). This package
is named `tensorflow`: only the repository root may be on sys.path (worker.py says why)."""
from frameworks.registry import FP16, Adapter, Bench, Modes, Precision, Release

ADAPTER = Adapter(
    "tensorflow",
    {"train": Bench(".worker:TFSession", files=".worker:TFFilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:TFSession.is_oom",
    data_backends=("tf.data",),
    import_name="tensorflow",
    releases=(Release("tensorflow", "2.15.1", "the oldest run here (tests/versions/tensorflow-2.15.1, "
                                     "Keras 2's last)",
                      dists=("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel")),
              Release("keras", "2.15.0", "keras.optimizers.AdamW, keras.mixed_precision's policies; "
                                  "the Keras of TensorFlow 2.15"),
              Release("keras", "3.0", "keras.optimizers.LossScaleOptimizer and its scale_loss (Keras 3; "
                               "Keras 2's loss scaling is another API)", when=FP16)),
    modes=Modes("tf.function", "xla", auto=False),
    precision=Precision(),
    tracer=".tracer:trace",
    layouts=False,
    models=("resnet50", "bert_base"),
    colour="#f29e1f",
    preload=(),  # its ranks run in their own interpreter (.venvs/tensorflow): each starts whole
    package=__name__)
