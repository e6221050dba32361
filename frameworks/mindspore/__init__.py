"""MindSpore (docs/frameworks/mindspore.md): the training session (worker.py) and
mindspore.dataset's data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench

ADAPTER = Adapter(
    "mindspore",
    {"train": Bench(".worker:MindSporeSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:MindSporeSession.is_oom",
    data_backends=("mindspore.dataset",),
    package=__name__)
