"""PyTorch's training sessions, one per model (stdlib + torch only; the adapter is
frameworks/pytorch/__init__.py).

Data parallel with DistributedDataParallel when WORLD_SIZE > 1: gloo on CPU,
NCCL on GPUs. AMP is bf16 autocast on CPU; on a GPU fp16 with a gradient
scaler, or bf16, as the spec's amp_dtype says. `compile` wraps the model in
torch.compile, PyTorch's counterpart of XLA; `compile=auto` (the default) is eager, as
PyTorch's own examples and NVIDIA's DeepLearningExamples train (contract/modes.py).
BERT's gradients are clipped by global norm (clip_grad_norm_, after the GradScaler's
unscale) while model.clip_grad is on. A model's session is the one its spec names
(contract/models/<name>.py's `pytorch_session`): frameworks/pytorch/models/<name>.py's
`session`, session.TorchSession for ResNet-50 and BERT, a session of their own for Wide & Deep
and InsightFace, a language model's at its layout (lm_session.py, or torchtitan's on GPUs).
data=files trains from the files through a DataLoader (frameworks/pytorch/loader.py).
"""
import importlib

from contract import models
from frameworks import registry
from frameworks.registry import resolve
from frameworks.pytorch import session  # noqa: F401  (torch, before the harness's memory cap)


# Imported with the worker, before the harness caps the rank's memory (memory_limit_mb counts
# from what the rank had imported then): torch and the sessions of the models without layouts
# that PyTorch's adapter trains, found by their specs. The modules of layouts (DTensor,
# pipelining, FSDP2, torchtitan) are imported with a language model's session only (session_of).
for _name in models.named(lambda s: s.name in registry.get("pytorch").models and not s.layouts):
    _ref = models.get(_name).pytorch_session
    assert _ref is not None  # a PyTorch model names its session (tests/unit/test_model_specs.py checks it)
    importlib.import_module(_ref.partition(":")[0])


def session_of(name: str):
    """The session (a callable of spec and dist) of model `name`, imported here: the modules
    of layouts stay out of the other models' ranks."""
    return resolve(models.get(name).pytorch_session)


def model_session(spec, dist):
    """The session of the spec's model (bench=train); with checkpoint.every, checkpointing as it
    trains (frameworks/pytorch/checkpoint/training.py)."""
    if (spec.config.get("checkpoint") or {}).get("every"):
        from frameworks.pytorch.checkpoint.training import Checkpointing
        return Checkpointing(session_of(spec.model.name), spec, dist)
    return session_of(spec.model.name)(spec, dist)
