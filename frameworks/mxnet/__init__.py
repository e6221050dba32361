"""MXNet's Gluon (docs/frameworks/mxnet.md): the training session (worker.py) and the gluon
DataLoader's data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench, Modes, Precision, Release

ADAPTER = Adapter(
    "mxnet",
    {"train": Bench(".worker:MXNetSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:MXNetSession.is_oom",
    data_backends=("gluon",),
    import_name="mxnet",
    releases=(Release("mxnet", "1.9.1", "the last release (MXNet is retired), the only one run here",
                      dists=("mxnet", "mxnet-mkl", "mxnet-cu112", "mxnet-cu117")),),
    modes=Modes("imperative", "hybridize", auto=True),
    precision=Precision(gpu={"bf16": "MXNet 1.9's bf16 AMP runs on oneDNN CPU kernels only; on a "
                                     "GPU use amp_dtype=fp16"},
                        onednn_bf16=True),
    tracer=None,
    layouts=False,
    models=("resnet50", "bert_base"),
    colour="#17a589",
    preload=(),  # its ranks run in their own interpreter (.venvs/mxnet): each starts whole
    package=__name__)
