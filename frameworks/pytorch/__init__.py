"""PyTorch (docs/frameworks/pytorch.md): every model's training session (worker.py), the
collectives of bench=comm (comm.py), the checkpoints of bench=checkpoint
(checkpoint_session.py) and the data=files pipeline (loader.py)."""
from frameworks.registry import Adapter, Bench

ADAPTER = Adapter(
    "pytorch",
    {"train": Bench(".worker:model_session", files=".loader:FilesSession"),
     "input": Bench(".loader:InputSession"),
     "comm": Bench(".comm:CommSession"),
     "checkpoint": Bench(".checkpoint_session:CheckpointSession")},
    oom=".session:TorchSession.is_oom",
    data_backends=("torch", "dali"),
    package=__name__)
