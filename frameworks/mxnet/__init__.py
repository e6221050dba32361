"""MXNet's Gluon (docs/frameworks/mxnet.md): the training session (worker.py) and the gluon
DataLoader's data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench

ADAPTER = Adapter(
    "mxnet",
    {"train": Bench(".worker:MXNetSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:MXNetSession.is_oom",
    data_backends=("gluon",),
    package=__name__)
