"""PyTorch (docs/frameworks/pytorch.md): every model's training session (worker.py: the session
its models/<name>.py defines), the collectives of bench=comm (comm.py), the checkpoints of
bench=checkpoint (checkpoint/bench.py), the data=files pipeline (loader.py) and profile=true's
trace (tracer.py). The rest, by role: session.py and lm_session.py (the sessions models train
in), models/ (each model's definition, plan and session), layouts/ (a model split over the
grid), titan/ (torchtitan's path on GPUs), checkpoint/ (DCP)."""
from frameworks.registry import TORCHTITAN, Adapter, Bench, Modes, Precision, Release

ADAPTER = Adapter(
    "pytorch",
    {"train": Bench(".worker:model_session", files=".loader:FilesSession"),
     "input": Bench(".loader:InputSession"),
     "comm": Bench(".comm:CommSession"),
     "checkpoint": Bench(".checkpoint.bench:CheckpointSession")},
    oom=".session:TorchSession.is_oom",
    data_backends=("torch", "dali"),
    import_name="torch",
    releases=(Release("torch", "2.11.0", "the oldest run here (tests/versions/torch-2.11: ResNet-50 "
                                 "and BERT; the lent GPU machines carry it)"),
              Release("torchtitan", "0.2.2", "the older of the two releases frameworks/pytorch/titan/ "
                                    "drives (releases.py): 0.3.0 with torch 2.13 or newer, 0.2.2 "
                                    "with torch 2.11", when=TORCHTITAN)),
    modes=Modes("eager", "torch.compile", auto=False),
    precision=Precision(),
    tracer=".tracer:trace",
    layouts=True,
    models=("bert_base", "deepseek_v3", "gpt", "gpt_oss", "insightface", "llama3", "qwen3_moe", "resnet50",
            "wide_deep"),
    colour="#e4572e",
    preload=("torch", "torch._dynamo", "torch.distributed"),  # 2.5-3 s of CPU a rank
    package=__name__)
