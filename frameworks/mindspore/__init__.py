"""MindSpore (docs/frameworks/mindspore.md): the training session (worker.py) and
mindspore.dataset's data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench, Modes, Precision, Release

ADAPTER = Adapter(
    "mindspore",
    {"train": Bench(".worker:MindSporeSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:MindSporeSession.is_oom",
    data_backends=("mindspore.dataset",),
    import_name="mindspore",
    releases=(Release("mindspore", "2.10.0", "the only release run here; older ones never ran"),),
    modes=Modes("pynative", "graph", auto=True),
    precision=Precision(cpu={"bf16": "MindSpore has no bf16 CPU kernels (Conv2D, MatMul, Gather); "
                                     "amp_dtype=fp16 runs"}),
    tracer=None,
    layouts=False,
    models=("resnet50", "bert_base"),
    colour="#2e86ab",
    preload=(),  # its ranks run in their own interpreter (.venvs/mindspore): each starts whole
    package=__name__)
