"""Can this device run this precision in this framework? Asked before a model is built.

A missing capability is a result, not a crash: the rank raises `Unsupported` with one
line naming what is missing, and the harness records the status `unsupported`. The
tests ask the same `precision_gap` whether to expect `ok` or `unsupported`, so they
hold on every CPU (machines differ: some have AVX512-BF16 or AMX, some only AVX2).

The rule every framework shares: on a GPU, bf16 needs compute capability 8.0 (Ampere) or
newer, fp16 5.3. Each framework's own gaps are its adapter's `precision` (frameworks/<name>/
__init__.py; frameworks/registry.py: Precision), each with the one line that says why:
MindSpore's missing bf16 CPU kernels, OneFlow's missing CPU autocast, Paddle's dynamic-graph
AMP on CUDA only, JAX's missing fp16 loss scaling, MXNet's CPU-only bf16. One rule is shared
by the oneDNN-based frameworks (MXNet, PaddlePaddle: `onednn_bf16`): bf16 on a CPU needs
AVX512-BF16 or AMX, without which oneDNN has no bf16 primitive for their convolutions and
matmuls ("could not create a primitive descriptor iterator"; Paddle aborts the process).
PyTorch, TensorFlow and JAX fall back to other kernels and run bf16 on any x86 CPU.
Standard library only: this runs in the framework's Python.
"""
import os

from contract.statuses import Unsupported  # capability.Unsupported to the adapters
from frameworks import registry

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
GPU_NEEDS = {"bf16": (8, 0), "fp16": (5, 3)}  # the compute capability each AMP dtype needs


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset:
    """The CPU's feature flags (x86 'flags', Arm 'Features'); empty where unknown."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def cpu_bf16_gap(flags=None):
    """None where this CPU has native bf16 for oneDNN, else why not."""
    if flags is None:
        flags = _forced_flags()
    if flags is None:
        flags = cpu_flags()
    if any(f in flags for f in CPU_BF16_FLAGS):
        return None
    return "bf16 AMP needs a CPU with AVX512-BF16 or AMX; this CPU has neither"


def precision_gap(framework: str, spec, gpu_capability=None, flags=None):
    """Why `framework` cannot run the spec's precision here, or None when it can.

    gpu_capability is the (major, minor) compute capability of the rank's GPU, () for a
    GPU whose capability the framework does not tell, or None on a CPU. flags replaces
    the CPU's flags (tests force each answer with it), as the environment variable
    DLBENCH_CPU_FLAGS does for a real worker."""
    if spec.precision != "amp":
        return None
    dtype = spec.amp_dtype or "bf16"
    rules = registry.get(framework).precision
    if gpu_capability is not None:
        need = GPU_NEEDS.get(dtype)
        if need and gpu_capability and tuple(gpu_capability) < need:
            return (f"{dtype} AMP needs a GPU of compute capability {need[0]}.{need[1]} or newer; "
                    f"this one is {gpu_capability[0]}.{gpu_capability[1]}")
        return rules.gpu.get(dtype)
    # On a CPU.
    gap = (rules.cpu.get(registry.ANY) or (None if spec.compile else rules.cpu_eager)
           or rules.cpu.get(dtype))
    if gap is None and rules.onednn_bf16:  # its CPU AMP is bf16 whatever amp_dtype says
        return cpu_bf16_gap(flags)
    return gap


def require(framework: str, spec, gpu_capability=None) -> None:
    """Raise Unsupported where `precision_gap` finds one; adapters call it before building."""
    gap = precision_gap(framework, spec, gpu_capability)
    if gap:
        raise Unsupported(gap)


def _forced_flags():
    """DLBENCH_CPU_FLAGS (space-separated) replaces /proc/cpuinfo's flags: a test forces
    a CPU without (or with) bf16 through a real worker with it."""
    forced = os.environ.get("DLBENCH_CPU_FLAGS")
    return None if forced is None else frozenset(forced.split())
