"""PyTorch's training sessions, one per model (stdlib + torch only; the adapter is
frameworks/pytorch/__init__.py).

Data parallel with DistributedDataParallel when WORLD_SIZE > 1: gloo on CPU,
NCCL on GPUs. AMP is bf16 autocast on CPU; on a GPU fp16 with a gradient
scaler, or bf16, as the spec's amp_dtype says. `compile` wraps the model in
torch.compile, PyTorch's counterpart of XLA; `compile=auto` (the default) is eager, as
PyTorch's own examples and NVIDIA's DeepLearningExamples train (contract/modes.py).
BERT's gradients are clipped by global norm (clip_grad_norm_, after the GradScaler's
unscale) while model.clip_grad is on. The session is
frameworks/pytorch/session.py; this module maps a model name to its session.
data=files trains from the files through a DataLoader (frameworks/pytorch/loader.py).
"""
from frameworks.pytorch import special
from frameworks.pytorch.session import TorchSession


# The language models' sessions are imported when a point trains one: the modules of layouts
# (DTensor, pipelining, FSDP2, torchtitan) stay out of the other models' ranks, whose memory
# cap (memory_limit_mb) counts from what the rank had imported when its session was built.
def _gpt(spec, dist):
    from frameworks.pytorch import gpt, lm_session
    return lm_session.session_of(gpt)(spec, dist)


def _llama3(spec, dist):
    """torchtitan's Llama 3 on GPUs; on the CPU the same definition with scaled dot-product
    attention (docs/llama3.md)."""
    from frameworks.pytorch import llama3, lm_session, titan
    if titan.uses_torchtitan(spec):
        return titan.TitanSession(spec, dist)
    return lm_session.session_of(llama3)(spec, dist)


def _moe(spec, dist):
    """A mixture of experts (DeepSeek-V3, Qwen3's): torchtitan's on GPUs; on the CPU the same
    definition with scaled dot-product attention and experts run one by one (docs/moe.md)."""
    import importlib

    from frameworks.pytorch import lm_session, titan
    if titan.uses_torchtitan(spec):
        from frameworks.pytorch import titan_moe
        return titan_moe.TitanMoESession(spec, dist)
    family = importlib.import_module(f"frameworks.pytorch.{spec.model.name}")
    return lm_session.session_of(family)(spec, dist)


SESSIONS = {"resnet50": TorchSession, "bert_base": TorchSession, "gpt": _gpt, "llama3": _llama3,
            "deepseek_v3": _moe, "qwen3_moe": _moe,
            **special.SESSIONS}


def model_session(spec, dist):
    """The session of the spec's model (bench=train); with checkpoint.every, checkpointing as it
    trains (frameworks/pytorch/checkpoint_training.py)."""
    if (spec.config.get("checkpoint") or {}).get("every"):
        from frameworks.pytorch.checkpoint_training import Checkpointing
        return Checkpointing(SESSIONS[spec.model.name], spec, dist)
    return SESSIONS[spec.model.name](spec, dist)
