"""What only OneFlow's adapter (frameworks/oneflow) must show; its rows of the shared table
(counts, fp32 sweep, AMP `unsupported` on a CPU, nn.Graph, two ranks) are
tests/integration/test_frameworks.py, whose sweeps these tests share.

Needs .venvs/oneflow (`make env-oneflow`: pyenv Python 3.10.13, oneflow 0.9.0 and the
cuDNN 8 / cuBLAS 11 wheels it links against); skips without it, and with OneFlow's own
import error if the env exists but `import oneflow` fails.
"""
import pytest

from tests.frameworks_env import (  # noqa: F401  (sweeps: a fixture)
    assert_trained, checksums, framework_ready, sweeps, two_ranks_sweep)

NAME = "oneflow"
pytestmark = pytest.mark.framework


@pytest.mark.e2e
def test_two_ranks_eager_and_graph_end_with_the_same_weights(sweeps):
    """Two CPU processes, DistributedDataParallel (eager) and the global view (nn.Graph):
    each way keeps its ranks' weights equal (the table's test), and both ways agree."""
    framework_ready(NAME)
    sums = {}
    for name, point in two_ranks_sweep(sweeps, NAME).items():
        assert_trained(NAME, point, world=2)
        sums[name.endswith("-compile")] = checksums(point.ranks)[0]
    assert sums[False] == pytest.approx(sums[True], rel=1e-4)
