"""MXNet's Gluon (docs/frameworks/mxnet.md): the training session (worker.py) and the gluon
DataLoader's data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench, Modes, Precision

ADAPTER = Adapter(
    "mxnet",
    {"train": Bench(".worker:MXNetSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:MXNetSession.is_oom",
    data_backends=("gluon",),
    import_name="mxnet",
    modes=Modes("imperative", "hybridize", auto=True),
    precision=Precision(gpu={"bf16": "MXNet 1.9's bf16 AMP runs on oneDNN CPU kernels only; on a "
                                     "GPU use amp_dtype=fp16"},
                        onednn_bf16=True),
    tracer=None,
    layouts=False,
    package=__name__)
