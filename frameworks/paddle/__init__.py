"""PaddlePaddle (docs/frameworks/paddle.md): the training session (worker.py) and
paddle.io's data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench

ADAPTER = Adapter(
    "paddle",
    {"train": Bench(".worker:PaddleSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:PaddleSession.is_oom",
    data_backends=("paddle.io",),
    package=__name__)
