"""MXNet through the suite: model sizes, a real sweep, two ranks, hybridize.

Needs .venvs/mxnet (`make -f mk/frameworks.mk env-mxnet`); skips without it.
What the records must say is docs/frameworks/mxnet.md's table: fp32 and bf16 AMP
(bf16 where the CPU has AVX512-BF16 or AMX; elsewhere `unsupported`, as the capability
check says) train imperatively and hybridized, on one rank and on two (dist_sync kvstore,
with a scheduler and a server started by the ranks), and the two ranks end with
the same weights.
"""
import glob
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.frameworks_env import amp_gap, assert_unsupported, parameter_count, require_env

pytestmark = pytest.mark.framework

ROOT = Path(__file__).resolve().parents[2]
NAME = "mxnet"


def sweep(tmp_path, *overrides, timeout=600):
    """Run `python -m launch -m ...` with the smoke preset; return {point: (run, [ranks])}."""
    out = subprocess.run(
        [sys.executable, "-m", "launch", "-m", f"framework={NAME}", "preset=smoke", "repeats=1",
         f"output_root={tmp_path}", *overrides],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    points = {}
    for pdir in sorted(glob.glob(str(tmp_path / "*" / "points" / "*"))):
        rdir = os.path.join(pdir, "repeat-00")
        with open(os.path.join(rdir, "run.json")) as f:
            run = json.load(f)
        ranks = []
        for path in sorted(glob.glob(os.path.join(rdir, "rank-*.json"))):
            with open(path) as f:
                ranks.append(json.load(f))
        points[os.path.basename(pdir)] = (run, ranks)
    assert points, out.stdout[-3000:]
    return points


def assert_trained(run, ranks, world_size=1):
    assert run["status"] == "ok", run["error"]
    assert len(ranks) == world_size
    for rec in ranks:
        assert rec["status"] == "ok", rec["error"]
        assert rec["world_size"] == world_size
        assert rec["framework"] == {"name": NAME, "version": "1.9.1"}
        measured = [s for s in rec["steps"] if s["phase"] == "measure"]
        assert len(measured) == rec["spec"]["measure_steps"] == 5
        assert all(math.isfinite(s["loss"]) for s in rec["steps"])
        # Step edges come from the engine (EngineTimer): ordered, inside the window.
        w = rec["window"]
        assert w["end"] > w["start"]
        assert all(w["start"] <= s["start"] <= s["end"] <= w["end"] + 1e-6 for s in measured)


def checksums(run_dir):
    """rank -> the parameter checksum the worker prints to its log at close()."""
    found = {}
    for log in glob.glob(os.path.join(run_dir, "rank-*.log")):
        with open(log) as f:
            m = re.search(r"mxnet rank (\d+) parameter checksum: (.+)", f.read())
        assert m, f"no checksum in {log}"
        found[int(m.group(1))] = m.group(2).strip()
    return found


@pytest.mark.parametrize("model", ["resnet50", "bert_base"])
@pytest.mark.parametrize("size", ["full", "tiny"])
def test_parameter_count_matches_pytorch(model, size):
    require_env(NAME)
    ours, reference = parameter_count(NAME, model, size), parameter_count("pytorch", model, size)
    assert abs(ours - reference) <= 0.005 * reference, (ours, reference)


@pytest.mark.e2e
def test_sweep_fp32_and_bf16_amp_train(tmp_path):
    require_env(NAME)
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32,amp")
    assert len(points) == 4
    for name, (run, ranks) in points.items():
        if "-amp-" in name and amp_gap(NAME):
            assert_unsupported(run, ranks, amp_gap(NAME))
            continue
        assert_trained(run, ranks)
        env = ranks[0]["environment"]
        assert env["device"] == "cpu" and env["compile"] == "imperative"
        assert env["amp"] == ("contrib.amp bfloat16" if "-amp-" in name else None)


@pytest.mark.e2e
def test_two_ranks_dist_sync_kvstore_agree(tmp_path):
    require_env(NAME)
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32", "gpus_per_node=2")
    assert len(points) == 2
    for name, (run, ranks) in points.items():
        assert_trained(run, ranks, world_size=2)
        assert all(r["environment"]["kvstore"] == "dist_sync" for r in ranks)
        # Different data per rank, so different losses...
        losses = [[s["loss"] for s in r["steps"]] for r in ranks]
        assert losses[0] != losses[1]
        # ...but summed gradients: the weights after the run are bitwise the same.
        sums = checksums(glob.glob(str(tmp_path / "*" / "points" / name / "repeat-00"))[0])
        assert sums[0] == sums[1], sums


@pytest.mark.e2e
def test_hybridize_trains_fp32_and_bf16_amp(tmp_path):
    require_env(NAME)
    points = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32,amp", "compile=true")
    assert len(points) == 4
    for name, (run, ranks) in points.items():
        assert name.endswith("-compile")
        if "-amp-" in name and amp_gap(NAME, compile=True):
            assert_unsupported(run, ranks, amp_gap(NAME, compile=True))
            continue
        assert_trained(run, ranks)
        assert ranks[0]["environment"]["compile"] == "hybridize"
