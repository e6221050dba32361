"""Older releases, as a site's images carry them (docs/frameworks/README.md, "Supported
versions"): the worker runs them, or its rank ends `unsupported` naming the version found and the
one needed (contract/versions.py), never `failed` from inside the framework. Each runs smoke
points through `python -m launch ... framework.python=.venvs/<env>/bin/python` and skips, saying
how to build its environment (mk/versions.mk), where that is missing.
"""
import pytest

from tests.launching import launch, rank_records
from tests.frameworks_env import ROOT

pytestmark = [pytest.mark.framework, pytest.mark.e2e]


def python_of(env: str) -> str:
    python = ROOT / ".venvs" / env / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{env} environment not built: run `make env-{env}`")
    return str(python)


def sweep(tmp_path, framework: str, env: str, *overrides):
    out = tmp_path / "sweep"
    res = launch("-m", f"framework={framework}", f"framework.python={python_of(env)}",
                 "launcher=local", "preset=smoke", "repeats=1", f"hydra.sweep.dir={out}", *overrides)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def test_jax_0_4_38_runs_one_rank_and_two_are_unsupported_naming_both(tmp_path):
    """JAX 0.4.38, flax 0.10.2, optax 0.2.4 (late-2024 images): one rank trains (its CPU backend
    once failed on gloo asked without a distributed client); two ranks need jax.lax.pcast (0.8.2)."""
    out = sweep(tmp_path, "jax", "jax-0.4.38", "model=resnet50", "gpus_per_node=1,2")
    (one,) = rank_records(out, "*-1x1-*")
    assert one["status"] == "ok", one["error"]
    assert one["framework"]["version"] == "0.4.38"
    assert one["framework"]["releases"] == {"jax": "0.4.38", "jaxlib": "0.4.38", "flax": "0.10.2",
                                            "optax": "0.2.4"}
    assert one["steps"][-1]["loss"] < one["steps"][0]["loss"]
    two = rank_records(out, "*-1x2-*")
    assert [r["status"] for r in two] == ["unsupported", "unsupported"]
    assert two[0]["error"].startswith("jax 0.4.38 is older than 0.8.2, the oldest this worker "
                                      "supports with several ranks"), two[0]["error"]
    assert not two[0]["steps"]


def test_tensorflow_2_15_with_keras_2_trains_both_models(tmp_path):
    out = sweep(tmp_path, "tensorflow", "tensorflow-2.15.1", "model=resnet50,bert_base")
    recs = rank_records(out, "*")
    assert [r["status"] for r in recs] == ["ok", "ok"], [r["error"] for r in recs]
    assert {r["framework"]["version"] for r in recs} == {"2.15.1"}
    assert {r["environment"]["keras"] for r in recs} == {"2.15.0"}
    assert all(r["steps"][-1]["loss"] < r["steps"][0]["loss"] for r in recs)


def test_torch_2_11_trains_resnet50_and_bert(tmp_path):
    """PyTorch 2.11 (the lent GPU machines' release; PyPI's wheel brings its CUDA libraries and
    runs on the CPU): the tiny ResNet-50 and BERT through the launcher."""
    out = sweep(tmp_path, "pytorch", "torch-2.11", "model=resnet50,bert_base")
    recs = rank_records(out, "*")
    assert [r["status"] for r in recs] == ["ok", "ok"], [r["error"] for r in recs]
    assert {r["framework"]["version"].split("+")[0] for r in recs} == {"2.11.0"}
    assert all(r["framework"]["releases"]["torch"] == "2.11.0" for r in recs)
    assert all(r["steps"][-1]["loss"] < r["steps"][0]["loss"] for r in recs)
