"""JAX adapter (frameworks/jax): models, a real sweep, 2 ranks, jit (XLA) on.

Needs `make -f mk/frameworks.mk env-jax` (.venvs/jax); skips otherwise.
Tiny models and the smoke preset keep the file to a few minutes on 2 cores
(most of it is JAX's start-up and XLA compiling, per point).
"""
import glob
import json
import math
import os
import re
import socket
import subprocess
import sys

import pytest

from tests.frameworks_env import ROOT, model_cfg, parameter_count, require_env, run_in_env

NAME = "jax"
pytestmark = pytest.mark.framework

CASES = [(m, s) for m in ("resnet50", "bert_base") for s in ("tiny", "full")]


@pytest.fixture(scope="module")
def jax_python():
    return require_env(NAME)


@pytest.fixture(scope="module")
def jax_counts(jax_python):
    """frameworks.jax.models.parameter_count for every case in one process of the JAX env
    (shapes only, through jax.eval_shape: nothing is allocated)."""
    code = ("import json, sys; from frameworks.jax.models import parameter_count; "
            "print(json.dumps([parameter_count(c) for c in json.loads(sys.argv[1])]))")
    cfgs = [model_cfg(m, s) for m, s in CASES]
    counts = json.loads(run_in_env(jax_python, code, json.dumps(cfgs)).strip().splitlines()[-1])
    return dict(zip(CASES, counts))


def test_import_resolves_the_real_jax(jax_python):
    """frameworks/jax is a package named `jax` too: `import jax` in it must be the library."""
    code = ("import frameworks.jax.worker as w, jax; "
            "print(jax.__file__, w.jax.__file__, w.jax.__version__)")
    lib, seen, version = run_in_env(jax_python, code).split()
    assert lib == seen and "site-packages" in lib and version == "0.10.2"


def test_counting_through_the_shared_helper(jax_python):
    assert parameter_count(NAME, "resnet50", "tiny") == parameter_count("pytorch", "resnet50", "tiny")


@pytest.mark.parametrize("model,size", CASES)
def test_parameter_counts_match_pytorch(jax_counts, model, size):
    ours, reference = jax_counts[(model, size)], parameter_count("pytorch", model, size)
    assert abs(ours - reference) <= 0.005 * reference, (ours, reference)


def sweep(tmp_path, *overrides, timeout=420):
    """Run `python -m launch -m ...` for this framework; return the sweep's repeat-00 folders."""
    argv = [sys.executable, "-m", "launch", "-m", f"framework={NAME}", "preset=smoke",
            "repeats=1", f"output_root={tmp_path}", *overrides]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    repeats = sorted(glob.glob(str(tmp_path / "*" / "points" / "*" / "repeat-00")))
    assert repeats, out.stdout + out.stderr
    return repeats


def read_ok(repeat_dir, world_size=1):
    """Assert the repeat and all its ranks are ok with finite losses; return the rank records."""
    with open(os.path.join(repeat_dir, "run.json")) as f:
        run = json.load(f)
    logs = "".join(open(p).read()[-1500:] for p in glob.glob(os.path.join(repeat_dir, "*.log")))
    assert run["status"] == "ok", (repeat_dir, run["error"], logs)
    assert run["world_size"] == world_size
    ranks = []
    for path in sorted(glob.glob(os.path.join(repeat_dir, "rank-*.json"))):
        with open(path) as f:
            rec = json.load(f)
        assert rec["status"] == "ok", rec["error"]
        assert rec["framework"] == {"name": NAME, "version": "0.10.2"}
        assert rec["world_size"] == world_size
        spec = rec["spec"]
        measured = [s for s in rec["steps"] if s["phase"] == "measure"]
        assert len(measured) == spec["measure_steps"]
        assert len(rec["steps"]) == spec["warmup_steps"] + spec["measure_steps"]
        assert all(math.isfinite(s["loss"]) for s in rec["steps"])
        assert rec["window"]["end"] > rec["window"]["start"]
        env = rec["environment"]
        assert env["device"] == "cpu" and env["jax_backend"] == "cpu"
        assert env["jaxlib"] == "0.10.2" and env["flax"] == "0.12.8" and env["optax"] == "0.2.8"
        assert env["amp_dtype"] == ("bf16" if spec["precision"] == "amp" else None)
        assert env["jit"] is bool(spec["compile"])
        assert env["global_device_count"] == world_size
        ranks.append(rec)
    assert len(ranks) == world_size
    return ranks


def checksums(repeat_dir):
    """The parameter checksum each rank prints when it closes (frameworks/jax/worker.py)."""
    found = {}
    for path in glob.glob(os.path.join(repeat_dir, "rank-*.log")):
        m = re.search(r"jax rank (\d+): parameter checksum after (\d+) steps: (\S+)",
                      open(path).read())
        assert m, path
        found[int(m.group(1))] = (int(m.group(2)), float(m.group(3)))
    return found


def losses(rec):
    return [s["loss"] for s in rec["steps"]]


@pytest.fixture(scope="module")
def eager_sweep(jax_python, tmp_path_factory):
    """The suite's own sweep: both models, fp32 and bf16 AMP, jit off (compile=false)."""
    repeats = sweep(tmp_path_factory.mktemp("jax-eager"), "model=resnet50,bert_base",
                    "precision=fp32,amp")
    return {rdir.split(os.sep)[-2].split("-", 1)[1]: rdir for rdir in repeats}


def test_sweep_both_models_fp32_and_amp(eager_sweep):
    assert sorted(eager_sweep) == ["jax-bert_base-amp-1x1-bs4", "jax-bert_base-fp32-1x1-bs4",
                                   "jax-resnet50-amp-1x1-bs4", "jax-resnet50-fp32-1x1-bs4"]
    for point, rdir in eager_sweep.items():
        (rec,) = read_ok(rdir)
        first = rec["steps"][0]["loss"]
        # A fresh classifier over 10 classes, and an MLM over 1000 tokens, start near ln(C).
        assert (1.0 < first < 6.0) if "resnet50" in point else (6.0 < first < 9.0), first
        assert losses(rec)[-1] < first  # it trains: same batch every step


def test_jit_on_matches_jit_off(eager_sweep, tmp_path):
    """compile=true wraps the whole step in jax.jit (one fused XLA program). Same weights,
    same batch, same dropout keys: the first step's loss equals the un-jitted one."""
    repeats = sweep(tmp_path, "model=resnet50,bert_base", "precision=fp32", "compile=true")
    assert len(repeats) == 2
    for rdir in repeats:
        point = rdir.split(os.sep)[-2].split("-", 1)[1]
        assert point.endswith("-compile")
        (rec,) = read_ok(rdir)
        (eager,) = read_ok(eager_sweep[point[:-len("-compile")]])
        assert losses(rec)[0] == pytest.approx(losses(eager)[0], rel=1e-4)
        assert losses(rec)[1] == pytest.approx(losses(eager)[1], rel=1e-2)


def test_two_ranks_agree(jax_python, tmp_path):
    """jax.distributed over 2 CPU processes (gloo), jitted step under shard_map: each rank
    trains on its own batch (seed + rank), so its losses differ, but the gradients are
    all-reduced and the weights (and BatchNorm statistics) stay identical."""
    repeats = sweep(tmp_path, "model=resnet50", "precision=fp32", "gpus_per_node=2",
                    "compile=true")
    (rdir,) = repeats
    r0, r1 = read_ok(rdir, world_size=2)
    assert r0["environment"]["cpu_collectives"] == "gloo"
    assert r0["steps"][0]["loss"] != r1["steps"][0]["loss"]
    sums = checksums(rdir)
    steps = r0["spec"]["warmup_steps"] + r0["spec"]["measure_steps"]
    assert sums[0][0] == sums[1][0] == steps
    assert sums[0][1] == sums[1][1], sums


@pytest.mark.parametrize("rank", [0, 1])
def test_lone_rank_times_out_with_a_record(jax_python, eager_sweep, tmp_path, rank):
    """A rank whose peer never comes fails after rendezvous_timeout_s with a record
    (JAX's own rendezvous would abort the process, leaving none: see the worker)."""
    with open(os.path.join(eager_sweep["jax-bert_base-fp32-1x1-bs4"], "spec.json")) as f:
        spec = json.load(f)
    spec.update(rendezvous_timeout_s=3, record_dir=str(tmp_path))
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT), RANK=str(rank), WORLD_SIZE="2",
               LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port))
    out = subprocess.run([jax_python, "-m", "frameworks", "--spec", str(tmp_path / "spec.json")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr[-2000:]
    with open(tmp_path / f"rank-{rank:05d}.json") as f:
        rec = json.load(f)
    assert rec["status"] == "failed"
    assert rec["error"].startswith("TimeoutError: rendezvous: "), rec["error"]
    assert f"within 3 s on 127.0.0.1:{port + 1}" in rec["error"]
