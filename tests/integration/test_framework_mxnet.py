"""What only MXNet's adapter (frameworks/mxnet) must show; its rows of the shared table
(counts, fp32 and bf16 AMP sweep, hybridize, two ranks over the dist_sync kvstore) are
tests/integration/test_frameworks.py.

Needs .venvs/mxnet (`make -f mk/frameworks.mk env-mxnet`); skips without it.
"""
import pytest

from tests.frameworks_env import assert_unsupported, framework_ready, sweep

NAME = "mxnet"
pytestmark = pytest.mark.framework


@pytest.mark.e2e
def test_a_cpu_without_bf16_is_unsupported_not_a_crash(tmp_path, monkeypatch):
    """DLBENCH_CPU_FLAGS forces the capability check's answer through a real worker, so the
    `unsupported` path runs on every CPU, with or without AVX512-BF16."""
    framework_ready(NAME)
    monkeypatch.setenv("DLBENCH_CPU_FLAGS", "fpu sse4_2 avx avx2")
    points = sweep(tmp_path, NAME, "model=resnet50", "precision=amp")
    (run, ranks, _), = points.values()
    assert_unsupported(run, ranks, "bf16 AMP needs a CPU with AVX512-BF16 or AMX; this CPU has neither")
