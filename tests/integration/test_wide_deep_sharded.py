"""Wide & Deep with its tables split by rows over the ranks, through `python -m launch` on
this machine's CPU (tiny size, gloo): each rank holds its share of the rows, the sharded
model trains exactly as the replicated one on the same data, a vocabulary that is out of
memory whole fits split over 3 ranks, and the report sets DLPerf's table beside ours."""
import glob
import json
import os
import subprocess
import sys

import pytest

import analysis
from analysis.figures import metrics
from launchers.suite import ROOT

pytestmark = pytest.mark.e2e


def launch(*args, code=0):
    env = dict(os.environ, OMP_NUM_THREADS="1")  # 2 shared cores: no oversubscription
    res = subprocess.run([sys.executable, "-m", "launch", "-m", "model=wide_deep", "preset=smoke",
                          "repeats=1", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=env)
    assert res.returncode == code, res.stderr[-3000:]


def records(folder):
    """{(embedding, ranks): [rank records in rank order]}"""
    out = {}
    for p in sorted(glob.glob(f"{folder}/points/*/repeat-*/rank-*.json")):
        r = json.load(open(p))
        out.setdefault((r["spec"]["model"]["embedding"], r["world_size"]), []).append(r)
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("wide_deep_sharded")
    # Same seed, same data (each rank's batch: seed + rank), both embeddings, 2 ranks; 301
    # rows split 151 + 150; a learning rate large enough that every update shows in the loss.
    launch("batch_size=64", "gpus_per_node=2", "model.deep_vocab_size=301", "model.wide_vocab_size=200",
           "model.optimizer.lr=2.0", "model.embedding=sharded,replicated", f"hydra.sweep.dir={root}/same")
    # 3M rows x 8: a table of 96 MB and its gradient as much again (and the wide table's 2 x
    # 12 MB) do not fit in 150 MiB; a third of them does. On one rank the sharded table is the
    # whole table. (The cap counts from PyTorch imported, torch._dynamo included.)
    launch("batch_size=512", "memory_limit_mb=150", "model.deep_vocab_size=3000000",
           "gpus_per_node=1,3", f"hydra.sweep.dir={root}/cap", code=1)   # the whole table: OOM
    return root


def test_each_rank_holds_its_share_of_the_rows(root):
    recs = records(root / "same")
    sharded = [r["environment"]["embedding_rows"] for r in recs["sharded", 2]]
    assert [(t["deep"]["first"], t["deep"]["rows"]) for t in sharded] == [(0, 151), (151, 150)]
    assert [(t["wide"]["first"], t["wide"]["rows"]) for t in sharded] == [(0, 100), (100, 100)]
    assert all(r["environment"]["embedding"] == "sharded" for r in recs["sharded", 2])
    whole = [r["environment"]["embedding_rows"]["deep"] for r in recs["replicated", 2]]
    assert whole == [{"first": 0, "rows": 301, "of": 301}] * 2


def test_sharded_trains_as_the_replicated_model(root):
    recs = records(root / "same")
    for sharded, replicated in zip(recs["sharded", 2], recs["replicated", 2]):
        assert sharded["status"] == replicated["status"] == "ok"
        loss = [s["loss"] for s in sharded["steps"]]
        assert loss == pytest.approx([s["loss"] for s in replicated["steps"]], rel=1e-5)
        # the updates show in the loss: the comparison is not of a model that stood still
        assert max(abs(v - loss[0]) for v in loss) > 0.05
    # the data-parallel part (the MLP) ends equal on both ranks
    checksums = {r["parameter_checksum"] for r in recs["sharded", 2]}
    assert len(checksums) == 1 and None not in checksums


def test_out_of_memory_whole_fits_sharded_over_three_ranks(root):
    m = metrics.metrics(analysis.load(root / "cap"))
    assert {(r.embedding, r.devices): r.status for r in m.itertuples()} \
        == {("sharded", 1): "oom", ("sharded", 3): "ok"}
    ok = m[m.status == "ok"].iloc[0]
    assert ok.latency_ms > 0 and ok.peak_memory_bytes > 0
    recs = records(root / "cap")
    assert "can't allocate memory" in recs["sharded", 1][0]["error"]
    assert [r["environment"]["embedding_rows"]["deep"]["rows"] for r in recs["sharded", 3]] \
        == [1_000_000] * 3


def test_report_shows_ours_beside_dlperfs_table(root):
    out = subprocess.run([sys.executable, "-m", "analysis", "report", str(root / "cap"), "--no-plot"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    section = out.stdout[out.stdout.index("## wide_deep (tiny)"):]
    for text in ("| sharded", "| 1x1", "| 1x3", "| OOM", " GiB",
                 "Published beside it: dlperf_v1.0_v100_wdl", "| 819.2M", "22.407 ms, 10745 MB"):
        assert text in section, text
