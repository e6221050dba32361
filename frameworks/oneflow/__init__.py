"""OneFlow (docs/frameworks/oneflow.md): the training session (worker.py) and the
oneflow.utils.data DataLoader's data=files pipeline (loader.py); both import oneflow only
when a session is built (importing it joins the process group)."""
from frameworks.registry import ANY, Adapter, Bench, Modes, Precision, Release

ADAPTER = Adapter(
    "oneflow",
    {"train": Bench(".worker:OneFlowSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:OneFlowSession.is_oom",
    data_backends=("oneflow.utils.data",),
    import_name="oneflow",
    releases=(Release("oneflow", "0.9.0", "the only release run here; older ones never ran"),),
    modes=Modes("eager", "graph", auto=True),
    precision=Precision(cpu={ANY: "OneFlow 0.9 has no CPU autocast (it warns 'CPU autocast is not "
                                "supported currently' and runs fp32): precision=amp needs a CUDA "
                                "device"}),
    tracer=None,
    layouts=False,
    models=("resnet50", "bert_base"),
    colour="#8c564b",
    preload=(),  # its ranks run in their own interpreter (.venvs/oneflow): each starts whole
    package=__name__)
