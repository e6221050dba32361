"""PyTorch's training sessions, one per model (stdlib + torch only; the adapter is
frameworks/pytorch/__init__.py).

Data parallel with DistributedDataParallel when WORLD_SIZE > 1: gloo on CPU,
NCCL on GPUs. AMP is bf16 autocast on CPU; on a GPU fp16 with a gradient
scaler, or bf16, as the spec's amp_dtype says. `compile` wraps the model in
torch.compile, PyTorch's counterpart of XLA; `compile=auto` (the default) is eager, as
PyTorch's own examples and NVIDIA's DeepLearningExamples train (contract/modes.py).
BERT's gradients are clipped by global norm (clip_grad_norm_, after the GradScaler's
unscale) while model.clip_grad is on. A model's session is the one its spec names
(contract/models/<name>.py's `pytorch_session`): session.TorchSession for ResNet-50 and BERT,
special.py's for Wide & Deep and InsightFace, a language model's module's own `session`.
data=files trains from the files through a DataLoader (frameworks/pytorch/loader.py).
"""
from contract import models
from frameworks.registry import resolve
# Imported with the worker, before the harness caps the rank's memory (memory_limit_mb counts
# from what the rank had imported then): torch and the sessions of the models without layouts.
from frameworks.pytorch import session, special  # noqa: F401


def session_of(name: str):
    """The session (a callable of spec and dist) of model `name`, imported here: the modules
    of layouts (DTensor, pipelining, FSDP2, torchtitan) stay out of the other models' ranks."""
    return resolve(models.get(name).pytorch_session)


def model_session(spec, dist):
    """The session of the spec's model (bench=train); with checkpoint.every, checkpointing as it
    trains (frameworks/pytorch/checkpoint_training.py)."""
    if (spec.config.get("checkpoint") or {}).get("every"):
        from frameworks.pytorch.checkpoint_training import Checkpointing
        return Checkpointing(session_of(spec.model.name), spec, dist)
    return session_of(spec.model.name)(spec, dist)
