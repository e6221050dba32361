"""What only JAX's adapter (frameworks/jax) must show; its rows of the shared table
(counts, fp32 and AMP sweep, jit, two ranks) are tests/integration/test_frameworks.py,
whose sweeps these tests share (tests.frameworks_env.sweeps).

Needs `make -f mk/frameworks.mk env-jax` (.venvs/jax); skips otherwise.
"""
import json
import os
import socket
import subprocess

import pytest

from tests.frameworks_env import (  # noqa: F401  (sweeps: a fixture)
    ROOT, assert_trained, checksums, compile_sweep, fp32_amp_sweep, framework_ready, losses,
    run_in_env, sweeps, two_ranks_sweep)

NAME = "jax"
pytestmark = pytest.mark.framework


@pytest.fixture(scope="module")
def jax_python():
    return framework_ready(NAME)


def test_import_resolves_the_real_jax(jax_python):
    """frameworks/jax is a package named `jax` too: `import jax` in it must be the library."""
    code = ("import frameworks.jax.worker as w, jax; "
            "print(jax.__file__, w.jax.__file__, w.jax.__version__)")
    lib, seen, version = run_in_env(jax_python, code).split()
    assert lib == seen and "site-packages" in lib and version == "0.10.2"


@pytest.mark.e2e
def test_sweep_losses_start_near_ln_classes_and_fall(jax_python, sweeps):
    """The suite's default sweep (jit off): a fresh classifier over 10 classes, and an MLM
    over 1000 tokens, start near ln(C); the loss falls (the same batch every step)."""
    for point, run in fp32_amp_sweep(sweeps, NAME).items():
        (rec,) = assert_trained(NAME, run)
        first = rec["steps"][0]["loss"]
        assert (1.0 < first < 6.0) if "resnet50" in point else (6.0 < first < 9.0), first
        assert losses(rec)[-1] < first


@pytest.mark.e2e
def test_jit_on_matches_jit_off(jax_python, sweeps):
    """compile=true wraps the whole step in jax.jit (one fused XLA program). Same weights,
    same batch, same dropout keys: the first step's loss equals the un-jitted one."""
    eager = fp32_amp_sweep(sweeps, NAME)
    jitted = compile_sweep(sweeps, NAME)
    assert len(jitted) == 2
    for point, run in jitted.items():
        assert point.endswith("-compile")
        (rec,) = assert_trained(NAME, run)
        (ref,) = assert_trained(NAME, eager[point[:-len("-compile")]])
        assert losses(rec)[0] == pytest.approx(losses(ref)[0], rel=1e-4)
        assert losses(rec)[1] == pytest.approx(losses(ref)[1], rel=1e-2)


@pytest.mark.e2e
def test_two_ranks_checksum_counts_every_step(jax_python, sweeps):
    """JAX's checksum carries the optimizer's step count: on both ranks, every step ran."""
    (point,) = two_ranks_sweep(sweeps, NAME).values()
    r0, r1 = assert_trained(NAME, point, world=2)
    steps = r0["spec"]["warmup_steps"] + r0["spec"]["measure_steps"]
    for text in checksums([r0, r1]):
        assert text.startswith("sum=") and text.endswith(f" steps={steps}"), text


@pytest.mark.parametrize("rank", [0, 1])
def test_lone_rank_times_out_with_a_record(jax_python, sweeps, tmp_path, rank):
    """A rank whose peer never comes fails after rendezvous_timeout_s with a record
    (JAX's own rendezvous would abort the process, leaving none: see the worker)."""
    with open(os.path.join(fp32_amp_sweep(sweeps, NAME)["jax-bert_base-fp32-1x1-bs4"].dir,
                           "spec.json")) as f:
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
    assert rec["error"].startswith("TimeoutError: rendezvous: ")
    assert f"within 3 s on 127.0.0.1:{port + 1}" in rec["error"]
    assert rec["parameter_checksum"] is None and "parameter_checksum_error" not in rec
