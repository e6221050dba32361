"""PyTorch adapter: `build(spec, dist)` for the harness (stdlib + torch only).

Data parallel with DistributedDataParallel when WORLD_SIZE > 1: gloo on CPU,
NCCL on GPUs. AMP is bf16 autocast on CPU; on a GPU fp16 with a gradient
scaler, or bf16, as the spec's amp_dtype says. `compile` wraps the model in
torch.compile, PyTorch's counterpart of XLA; `compile=auto` (the default) is eager, as
PyTorch's own examples and NVIDIA's DeepLearningExamples train (frameworks/common/modes.py).
BERT's gradients are clipped by global norm (clip_grad_norm_, after the GradScaler's
unscale) while model.clip_grad is on. The session is
frameworks/pytorch/session.py; this module maps a model name to its session.
data=files trains from the files through a DataLoader (frameworks/pytorch/loader.py).
"""
from frameworks.common import datafiles
from frameworks.pytorch import gpt, llama3, loader, special, titan
from frameworks.pytorch.lm_session import LMSession
from frameworks.pytorch.session import TorchSession

# Llama 3: torchtitan's on GPUs; on the CPU the same definition with scaled-dot-product attention
Llama3Session = type("Llama3Session", (LMSession,), {"family": llama3})
SESSIONS = {"resnet50": TorchSession, "bert_base": TorchSession,
            "gpt": type("GPTSession", (LMSession,), {"family": gpt}),
            "llama3": lambda spec, dist: (titan.TitanSession if titan.uses_torchtitan(spec)
                                          else Llama3Session)(spec, dist),
            **special.SESSIONS}


def build(spec, dist):
    if datafiles.reads_files(spec):
        return loader.FilesSession(spec, dist)
    return SESSIONS[spec["model"]["name"]](spec, dist)


build.is_oom = TorchSession.is_oom  # the harness's one OOM check, also when building fails
build.data_backends = ("torch", "dali")  # data.backend; the first is the default
