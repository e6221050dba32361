"""Where a rank runs and in which AMP dtype: decided once, here, for every adapter.

Each adapter asks its framework how many CUDA devices it sees and passes the count;
what `device=auto|cpu|cuda` then means, and the AMP dtype that follows, are the
same in every framework. Standard library only: this runs in the framework's Python.
"""
from .capability import Unsupported


def use_gpu(spec, gpus: int, framework: str, why_none: str = "") -> bool:
    """Whether this rank trains on a CUDA device. device=cuda on a machine where the
    framework sees none is `unsupported`, with `why_none` (say, which build is the CPU one)."""
    want = spec.device
    if want == "cuda" and gpus <= 0:
        raise Unsupported(f"device=cuda asked for, but {framework} sees no CUDA device"
                          + (f" ({why_none})" if why_none else ""))
    return want in ("auto", "cuda") and gpus > 0


def amp_dtype(spec, gpu: bool, cpu_dtypes=("bf16",)):
    """'bf16' or 'fp16' for an AMP run, None for fp32. A GPU runs the spec's amp_dtype; a
    CPU runs it where the framework has CPU kernels for it (`cpu_dtypes`: MindSpore's
    are fp16), else bf16, the CPU autocast dtype of PyTorch, TensorFlow and oneDNN."""
    if spec.precision != "amp":
        return None
    asked = spec.amp_dtype or "bf16"
    return asked if gpu or asked in cpu_dtypes else "bf16"
