"""GPT layouts on the real local Slurm cluster (3 nodes x 2 fake GPUs; CPUs and gloo): the
tiny cases that fit a node, and a 3-D grid across nodes (dp 1 x tp 2 x pp 3 on 3 nodes x 2:
the pipeline's stages across the nodes, tensor parallelism inside each), with losses equal
to the single-device run's."""
import glob
import json

import pytest

from contract import parallel
from tests.launching import launch

pytestmark = pytest.mark.slurm
STEPS = ["warmup_steps=2", "measure_steps=3", "repeats=1", "timeout_s=300", "rendezvous_timeout_s=60"]
MODEL = ["model=gpt", "model.size=tiny", "model.dropout=0.0", "model.layers=6", "model.heads=4",
         "model.vocab_size=1024"]
NODE_CASES = ["DP_2x1x1_8_64x4", "MP_1x2x1_8_64x4", "PP_1x1x2_8_64x4", "FSDP_2x1x1_8_64x4"]


def _records(sweep):
    return [json.load(open(p)) for p in sorted(glob.glob(f"{sweep}/points/*/repeat-00/rank-*.json"))]


def _losses(rec):
    return [s["loss"] for s in rec["steps"]]


def _run(*args):
    res = launch(*args, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def test_pipeline_across_nodes_tensor_parallel_inside(slurm_cluster, tmp_path):
    sweep = tmp_path / "grid"
    _run(*MODEL, *STEPS, "nodes=3", "gpus_per_node=2", "parallel.tp=2", "parallel.pp=3",
         "batch_size=2", "global_batch_size=6", "launcher=slurm", "cluster=localtest",
         f"hydra.run.dir={sweep}")
    _run("status", str(sweep), "--wait")
    _run(*MODEL, *STEPS, "batch_size=6", "launcher=local", f"hydra.run.dir={tmp_path / 'one'}")
    [one] = _records(tmp_path / "one")
    ranks = _records(sweep)
    assert [r["status"] for r in ranks] == ["ok"] * 6, [r.get("error") for r in ranks]
    lay = parallel.Layout.of(ranks[0]["parallel"]["layout"])
    stage_hosts = {}
    for rec in ranks:
        assert _losses(rec) == pytest.approx(_losses(one), rel=1e-5)
        c = rec["parallel"]["coords"]
        assert c == parallel.coords(rec["rank"], lay)
        stage_hosts.setdefault(c["pp"], set()).add(rec["host"])
    # each stage's tensor-parallel pair on one node, the three stages on three nodes
    assert all(len(hosts) == 1 for hosts in stage_hosts.values())
    assert len(set.union(*stage_hosts.values())) == 3
    owned = sum(r["parallel"]["parameters"]["owned"] for r in ranks)
    assert owned == pytest.approx(one["parallel"]["parameters"]["model"], abs=0.5)


def test_the_tiny_cases_that_fit_a_node_run_on_the_cluster(slurm_cluster, tmp_path):
    sweep = tmp_path / "cases"
    _run("-m", f"gpt_case_tiny={','.join(NODE_CASES)}", *STEPS, "launcher=slurm",
         "cluster=localtest", f"hydra.sweep.dir={sweep}")
    _run("status", str(sweep), "--wait")
    ranks = _records(sweep)
    assert len(ranks) == 2 * len(NODE_CASES)
    assert all(r["status"] == "ok" for r in ranks), [r.get("error") for r in ranks]
    by_case = {}
    for rec in ranks:
        by_case.setdefault(rec["spec"]["config"]["case"], []).append(_losses(rec))
    first = by_case[NODE_CASES[0]][0]
    for case, losses in by_case.items():
        for mine in losses:
            assert mine == pytest.approx(first, rel=1e-5), case
