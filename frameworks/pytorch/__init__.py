"""PyTorch (docs/frameworks/pytorch.md): every model's training session (worker.py: the session
its models/<name>.py defines), the collectives of bench=comm (comm.py), the checkpoints of
bench=checkpoint (checkpoint/bench.py), the data=files pipeline (loader.py) and profile=true's
trace (tracer.py). The rest, by role: session.py and lm_session.py (the sessions models train
in), models/ (each model's definition, plan and session), layouts/ (a model split over the
grid), titan/ (torchtitan's path on GPUs), checkpoint/ (DCP)."""
from frameworks.registry import Adapter, Bench, Modes, Precision

ADAPTER = Adapter(
    "pytorch",
    {"train": Bench(".worker:model_session", files=".loader:FilesSession"),
     "input": Bench(".loader:InputSession"),
     "comm": Bench(".comm:CommSession"),
     "checkpoint": Bench(".checkpoint.bench:CheckpointSession")},
    oom=".session:TorchSession.is_oom",
    data_backends=("torch", "dali"),
    import_name="torch",
    modes=Modes("eager", "torch.compile", auto=False),
    precision=Precision(),
    tracer=".tracer:trace",
    layouts=True,
    package=__name__)
