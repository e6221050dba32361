"""OneFlow through the suite: parameter counts, and real sweeps on tiny models.

Needs .venvs/oneflow (`make env-oneflow`: pyenv Python 3.10.13, oneflow 0.9.0 and the
cuDNN 8 / cuBLAS 11 wheels it links against); every test skips without it, and skips
with OneFlow's own import error if the env exists but `import oneflow` fails.
What runs here and what does not is written up in docs/frameworks/oneflow.md.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys

import pytest

from tests.frameworks_env import ROOT, amp_gap, assert_unsupported, parameter_count, require_env

NAME = "oneflow"
pytestmark = pytest.mark.framework

# OneFlow 0.9 has no CPU autocast: the capability check says so.
AMP_ON_CPU = "OneFlow 0.9 has no CPU autocast"


@pytest.fixture(scope="module")
def python():
    python = require_env(NAME)
    out = subprocess.run([python, "-c", "import oneflow"], capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        pytest.skip("import oneflow fails: " + out.stderr.strip().splitlines()[-1])
    return python


@pytest.mark.parametrize("model", ["resnet50", "bert_base"])
@pytest.mark.parametrize("size", ["tiny", "full"])
def test_parameter_count_matches_pytorch(python, model, size):
    ours, ref = parameter_count(NAME, model, size), parameter_count("pytorch", model, size)
    assert abs(ours - ref) <= 0.005 * ref, (ours, ref)


def sweep(tmp_path, *overrides, timeout=600):
    out = subprocess.run(
        [sys.executable, "-m", "launch", "-m", f"framework={NAME}", "preset=smoke", "repeats=1",
         f"output_root={tmp_path}", *overrides],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    points = {}
    for run_path in sorted(glob.glob(f"{tmp_path}/*/points/*/repeat-00/run.json")):
        rdir = os.path.dirname(run_path)
        ranks = [json.load(open(p)) for p in sorted(glob.glob(f"{rdir}/rank-*.json"))]
        points[os.path.basename(os.path.dirname(rdir))] = (json.load(open(run_path)), ranks, rdir)
    assert points, out.stdout[-3000:]
    return points


def assert_trained(run, ranks, world=1, measure_steps=5):
    assert run["status"] == "ok", run["error"]
    assert len(ranks) == world
    for rec in ranks:
        assert rec["status"] == "ok", rec["error"]
        assert rec["world_size"] == world
        assert rec["framework"] == {"name": NAME, "version": "0.9.0"}
        timed = [s for s in rec["steps"] if s["phase"] == "measure"]
        assert len(timed) == measure_steps
        assert all(math.isfinite(s["loss"]) for s in rec["steps"])


def checksums(rdir, world=2):
    sums = []
    for rank in range(world):
        log = open(f"{rdir}/rank-{rank:05d}.log").read()
        sums.append(float(re.search(rf"oneflow rank {rank}: parameter checksum (\S+)", log).group(1)))
    return sums


@pytest.mark.e2e
def test_sweep_fp32_trains_and_amp_is_unsupported_clearly(python, tmp_path):
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32,amp")
    assert len(points) == 4
    for name, (run, ranks, _) in points.items():
        if "-amp-" in name:  # no mixed precision on CPU in OneFlow 0.9
            assert_unsupported(run, ranks, amp_gap(NAME))
            assert ranks[0]["error"].startswith(AMP_ON_CPU), ranks[0]["error"]
        else:
            assert_trained(run, ranks)
            assert ranks[0]["environment"]["mode"] == "eager"


@pytest.mark.e2e
def test_graph_mode(python, tmp_path):
    """compile=true runs the step as a oneflow.nn.Graph."""
    points = sweep(tmp_path, "model=resnet50,bert_base", "compile=true")
    assert len(points) == 2
    for run, ranks, _ in points.values():
        assert_trained(run, ranks)
        assert ranks[0]["environment"]["mode"] == "nn.Graph"


@pytest.mark.e2e
def test_two_ranks_data_parallel_stay_in_sync(python, tmp_path):
    """Two CPU processes: DistributedDataParallel (eager) and the global view (nn.Graph).
    Each rank trains on its own batch, yet their weights agree, and both ways agree."""
    points = sweep(tmp_path, "model=resnet50", "gpus_per_node=2", "compile=false,true")
    assert len(points) == 2
    sums = {}
    for name, (run, ranks, rdir) in points.items():
        assert_trained(run, ranks, world=2)
        s0, s1 = checksums(rdir)
        assert s0 == pytest.approx(s1, rel=1e-6)
        sums[name.endswith("-compile")] = s0
        losses = [[s["loss"] for s in r["steps"]] for r in ranks]
        if name.endswith("-compile"):
            assert losses[0] == losses[1]  # the loss of the global batch, on every rank
        else:
            assert losses[0] != losses[1]  # each rank's loss on its own batch
    assert sums[False] == pytest.approx(sums[True], rel=1e-4)
