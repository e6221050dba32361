"""PyTorch (docs/frameworks/pytorch.md): every model's training session (worker.py), the
collectives of bench=comm (comm.py), the checkpoints of bench=checkpoint
(checkpoint_session.py), the data=files pipeline (loader.py) and profile=true's trace
(tracer.py)."""
from frameworks.registry import Adapter, Bench, Modes, Precision

ADAPTER = Adapter(
    "pytorch",
    {"train": Bench(".worker:model_session", files=".loader:FilesSession"),
     "input": Bench(".loader:InputSession"),
     "comm": Bench(".comm:CommSession"),
     "checkpoint": Bench(".checkpoint_session:CheckpointSession")},
    oom=".session:TorchSession.is_oom",
    data_backends=("torch", "dali"),
    import_name="torch",
    modes=Modes("eager", "torch.compile", auto=False),
    precision=Precision(),
    tracer=".tracer:trace",
    layouts=True,
    package=__name__)
