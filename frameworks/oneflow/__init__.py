"""OneFlow (docs/frameworks/oneflow.md): the training session (worker.py) and the
oneflow.utils.data DataLoader's data=files pipeline (loader.py); both import oneflow only
when a session is built (importing it joins the process group)."""
from frameworks.registry import Adapter, Bench

ADAPTER = Adapter(
    "oneflow",
    {"train": Bench(".worker:OneFlowSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:OneFlowSession.is_oom",
    data_backends=("oneflow.utils.data",),
    package=__name__)
