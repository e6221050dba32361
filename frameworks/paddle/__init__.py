"""PaddlePaddle (docs/frameworks/paddle.md): the training session (worker.py) and
paddle.io's data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench, Modes, Precision, Release

ADAPTER = Adapter(
    "paddle",
    {"train": Bench(".worker:PaddleSession", files=".worker:FilesSession"),
     "input": Bench(".loader:InputSession")},
    oom=".worker:PaddleSession.is_oom",
    data_backends=("paddle.io",),
    import_name="paddle",
    releases=(Release("paddle", "3.3.1", "the only release run here; older ones never ran",
                      dists=("paddlepaddle", "paddlepaddle-gpu")),),
    modes=Modes("eager", "to_static", auto=False),
    precision=Precision(cpu_eager="PaddlePaddle cannot run AMP on a CPU in dynamic-graph mode "
                                  "(auto_cast enables itself only on CUDA, XPU and custom places); "
                                  "bf16 AMP on a CPU needs compile=true",
                        onednn_bf16=True),
    tracer=None,
    layouts=False,
    models=("resnet50", "bert_base"),
    colour="#2d5dd7",
    preload=(),  # its ranks run in their own interpreter (.venvs/paddle): each starts whole
    package=__name__)
