"""The capability check (frameworks/common/capability.py): each answer forced, whatever
this machine's CPU has."""
import pytest

from frameworks import registry
from frameworks.common import capability
from tests.runspecs import run_spec

AMP = run_spec(precision="amp", amp_dtype="bf16", compile=False)
NO_BF16 = frozenset({"fma", "avx", "avx2"})
BF16 = frozenset({"avx512f", "avx512_bf16"})
AMX = frozenset({"amx_bf16", "amx_tile"})


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\n")
    assert capability.cpu_flags(str(info)) == {"fpu", "avx2", "avx512_bf16"}
    assert capability.cpu_flags(str(tmp_path / "absent")) == frozenset()


@pytest.mark.parametrize("flags,gap", [
    (NO_BF16, "bf16 AMP needs a CPU with AVX512-BF16 or AMX; this CPU has neither"),
    (BF16, None), (AMX, None)])
@pytest.mark.parametrize("framework,compile", [("mxnet", False), ("mxnet", True), ("paddle", True)])
def test_onednn_bf16_on_a_cpu_needs_the_flags(framework, compile, flags, gap):
    assert capability.precision_gap(framework, AMP.replace(compile=compile), flags=flags) == gap


def _no_cpu_gap(name: str) -> bool:
    precision = registry.get(name).precision
    return not (precision.cpu or precision.cpu_eager or precision.onednn_bf16)


@pytest.mark.parametrize("framework", [n for n in registry.names() if _no_cpu_gap(n)])
def test_frameworks_with_their_own_bf16_kernels_run_on_any_cpu(framework):
    assert capability.precision_gap(framework, AMP, flags=NO_BF16) is None


@pytest.mark.parametrize("framework,spec,words", [
    ("oneflow", AMP, "no CPU autocast"),
    ("paddle", AMP, "dynamic-graph mode"),
    ("mindspore", AMP, "no bf16 CPU kernels")])
def test_framework_gaps_on_a_cpu_whatever_the_flags(framework, spec, words):
    assert words in capability.precision_gap(framework, spec, flags=BF16)


def test_mindspore_fp16_and_fp32_everywhere_are_fine():
    assert capability.precision_gap("mindspore", AMP.replace(amp_dtype="fp16"), flags=NO_BF16) is None
    for fw in registry.names():
        assert capability.precision_gap(fw, run_spec(precision="fp32"), flags=NO_BF16) is None


@pytest.mark.parametrize("cc,dtype,gap", [
    ((7, 0), "bf16", "bf16 AMP needs a GPU of compute capability 8.0 or newer; this one is 7.0"),
    ((8, 0), "bf16", None), ((9, 0), "fp16", None), ((5, 2), "fp16", "compute capability 5.3"),
    ((), "bf16", None)])  # a GPU whose framework does not tell its capability: not refused
def test_gpu_precision_by_compute_capability(cc, dtype, gap):
    got = capability.precision_gap("pytorch", AMP.replace(amp_dtype=dtype), gpu_capability=cc)
    assert got == gap or (gap and gap in got)


def test_gpu_framework_gaps():
    assert "fp16" in capability.precision_gap("jax", AMP.replace(amp_dtype="fp16"), gpu_capability=(9, 0))
    assert "CPU kernels only" in capability.precision_gap("mxnet", AMP, gpu_capability=(9, 0))
    assert capability.precision_gap("oneflow", AMP, gpu_capability=()) is None


def test_require_raises_unsupported_and_the_environment_forces_flags(monkeypatch):
    monkeypatch.setenv("DLBENCH_CPU_FLAGS", "avx2")
    with pytest.raises(capability.Unsupported, match="AVX512-BF16 or AMX"):
        capability.require("mxnet", AMP)
    monkeypatch.setenv("DLBENCH_CPU_FLAGS", "avx2 amx_bf16")
    capability.require("mxnet", AMP)


def test_the_rules_are_the_adapters(monkeypatch):
    """capability.py holds no framework's name: each gap is its adapter's `precision`, in
    this order on a CPU: any dtype, then eager mode, then the dtype, then oneDNN's bf16."""
    from frameworks import registry
    rules = registry.Precision(gpu={"fp16": "gpu fp16"}, cpu={"fp16": "cpu fp16"},
                               cpu_eager="eager", onednn_bf16=True)
    monkeypatch.setattr(registry, "get", {"site": registry.Adapter("site", {}, precision=rules)}.get)
    gap = capability.precision_gap
    assert gap("site", AMP.replace(amp_dtype="fp16"), gpu_capability=(9, 0)) == "gpu fp16"
    assert gap("site", AMP, gpu_capability=(9, 0)) is None
    assert gap("site", AMP, flags=BF16) == "eager"
    assert gap("site", AMP.replace(amp_dtype="fp16", compile=True), flags=BF16) == "cpu fp16"
    assert gap("site", AMP.replace(compile=True), flags=NO_BF16).startswith("bf16 AMP needs a CPU")
    assert gap("site", AMP.replace(compile=True), flags=BF16) is None
