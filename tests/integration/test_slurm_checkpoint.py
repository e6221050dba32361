"""Checkpoints on the real local Slurm cluster (3 nodes x 2 fake GPUs; CPUs and gloo;
docs/checkpoint.md): the tiny GPT with FSDP over the three nodes (dp 3, a rank a node) and at
tp 2 x pp 2 over two nodes, sync and async, every rank's load equal to its save, the
checkpoint under the sweep folder every node sees. About 2 minutes on 2 cores, queueing aside."""
import glob
import json

import pytest

from tests.launching import launch

pytestmark = pytest.mark.slurm
COMMON = ["bench=checkpoint", "checkpoint.mode=sync,async", "warmup_steps=1", "repeats=1",
          "bench.warmup_saves=0", "timeout_s=300", "rendezvous_timeout_s=60", "launcher=slurm",
          "cluster=localtest", "model=gpt", "model.size=tiny", "model.dropout=0.0",
          "model.layers=4", "model.heads=4", "model.vocab_size=1024"]
LAYOUTS = {"fsdp": ["nodes=3", "gpus_per_node=1", "parallel.fsdp=true", "batch_size=2",
                    "global_batch_size=6"],
           "tp-pp": ["nodes=2", "gpus_per_node=2", "parallel.tp=2", "parallel.pp=2",
                     "batch_size=2", "global_batch_size=4"]}


def _run(*args):
    res = launch(*args, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.fixture
def sweeps(tmp_path):
    """The two sweeps' folders; whatever they left queued or running is cancelled at the end,
    so a failure here costs the next test nothing."""
    dirs = {name: tmp_path / name for name in LAYOUTS}
    yield dirs
    for d in dirs.values():
        if d.exists():
            launch("cancel", str(d), timeout=120)


def test_both_layouts_across_nodes_sync_and_async(slurm_cluster, sweeps, tmp_path):
    for name, layout in LAYOUTS.items():
        _run("-m", *COMMON, *layout, f"hydra.sweep.dir={sweeps[name]}")
    waits = {name: launch("status", str(d), "--wait", timeout=600) for name, d in sweeps.items()}
    for name, w in waits.items():   # both waited for: a failure says which rank and why
        errors = [(p, json.load(open(p)).get("error")) for p in
                  glob.glob(f"{sweeps[name]}/points/*/repeat-*/rank-*.json")]
        assert w.returncode == 0, (name, w.stdout[-2000:], w.stderr[-2000:], errors)
    for name, hosts in (("fsdp", 3), ("tp-pp", 2)):
        recs = [json.load(open(p)) for p in glob.glob(f"{tmp_path / name}/points/*/repeat-00/rank-*.json")]
        assert len(recs) == 2 * (3 if name == "fsdp" else 4)   # sync and async
        assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
        assert len({r["host"] for r in recs}) == hosts
        assert {r["checkpoint"]["mode"] for r in recs} == {"sync", "async"}
        for r in recs:
            c = r["checkpoint"]
            assert c["equal"] and c["bytes"] > 0 and c["durable_s"] >= c["blocked_s"] > 0
            assert c["root"].startswith(str(tmp_path / name))   # under the sweep folder
