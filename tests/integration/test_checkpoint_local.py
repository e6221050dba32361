"""Checkpoints end to end on local ranks (gloo), through `python -m launch` and
`python -m analysis report` (docs/checkpoint.md): the tiny GPT at FSDP dp 2 and at tp 2 x pp 2,
sync and async, each load equal to its save and its bytes those on disk; a read-only folder, a
full filesystem, a lost shard and a changed value each end the repeat with its named status
and cause (one sweep of four points); checkpoint.every beside the same training without. About
90 s of CPU, nearly all of it the 24 ranks' imports of torch."""
import contextlib
import glob
import json
import os
import subprocess

import pytest

from analysis.figures import checkpoint as report_checkpoint
from analysis import load
from contract import paths
from tests.launching import analysis, launch

pytestmark = pytest.mark.e2e
BASE = ["warmup_steps=1", "repeats=1", "bench.warmup_saves=0", "launcher=local", "timeout_s=300",
        "rendezvous_timeout_s=60"]
CASES = "FSDP_2x1x1_8_64x4,2D_PP_1x2x2_8_64x4"


def _run(*args, code=0):
    res = launch(*args, timeout=900)
    assert res.returncode == code, res.stderr[-3000:]
    return res


def _records(sweep):
    out = {}
    for path in sorted(glob.glob(f"{sweep}/points/*/repeat-00/rank-*.json")):
        rec = json.load(open(path))
        out.setdefault(rec["spec"]["point"], []).append(rec)
    return out


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """Both layouts, sync and async, the files kept so that their bytes can be counted."""
    sweep = tmp_path_factory.mktemp("ckpt") / "sweep"
    _run("-m", "bench=checkpoint", f"gpt_case_tiny={CASES}", "checkpoint.mode=sync,async",
         "checkpoint.keep=true", *BASE, f"hydra.sweep.dir={sweep}")
    return sweep


def test_both_layouts_save_and_load_equal_sync_and_async(kept):
    recs = _records(kept)
    assert len(recs) == 4 and sorted(len(r) for r in recs.values()) == [2, 2, 4, 4]
    for point, ranks in recs.items():
        assert all(r["status"] == "ok" for r in ranks), [r["error"] for r in ranks]
        for r in ranks:
            c = r["checkpoint"]
            assert c["equal"] and c["entries"] > 0 and c["bytes"] > 0 and c["bare_bytes"] == c["bytes"]
            assert 0 < c["blocked_s"] <= c["durable_s"] and c["load_s"] > 0
            assert c["mode"] == ("async" if point.endswith("async") else "sync")
        # what the ranks say they wrote is what the committed folder holds, .metadata included
        [folder] = glob.glob(os.path.join(ranks[0]["checkpoint"]["root"], paths.checkpoint_name(0)))
        assert os.path.isfile(os.path.join(folder, paths.DCP_METADATA))
        assert sum(r["checkpoint"]["bytes"] for r in ranks) == sum(
            os.path.getsize(f) for f in glob.glob(os.path.join(folder, "*")) + [os.path.join(folder, paths.DCP_METADATA)])
        assert not glob.glob(os.path.join(ranks[0]["checkpoint"]["root"], "*" + paths.PARTIAL_SUFFIX))


def test_the_report_has_the_table_and_the_plot(kept):
    table = report_checkpoint.checkpoint_table(load(kept))
    assert sorted(table.layout.unique()) == ["dp1 x tp2 x pp2, 1f1b", "dp2, fsdp"]
    assert (table.status == "ok").all() and (table.gbps > 0).all() and (table.ratio > 0).all()
    res = analysis("report", str(kept))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "## Checkpoints (torch.distributed.checkpoint" in res.stdout
    assert "### gpt, dp1 x tp2 x pp2, 1f1b" in res.stdout and "### gpt, dp2, fsdp" in res.stdout
    assert os.path.getsize(kept / paths.REPORT_DIR / "checkpoint.png") > 0


@contextlib.contextmanager
def tmpfs(path, *options):
    """A small tmpfs at `path` (root only), removed however the test ends."""
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only or full filesystem needs root")
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


# every fault alone: a read-only and a full checkpoint.dir, a lost shard, a changed value
ONE_FAULT = ('exclude=[{where:"(checkpoint.dir != null) + (bench.drop_shard_rank != null) + '
             '(bench.corrupt_rank != null) != 1"}]')


def test_read_only_full_lost_shard_and_changed_value_end_with_their_names(tmp_path):
    sweep = tmp_path / "faults"
    with tmpfs(tmp_path / "ro", "ro", "size=1m") as ro, tmpfs(tmp_path / "full", "size=1m") as full:
        _run("-m", "bench=checkpoint", "gpt_case_tiny=FSDP_2x1x1_8_64x4", *BASE,
             f"checkpoint.dir={ro},{full},null", "bench.drop_shard_rank=null,1",
             "bench.corrupt_rank=null,0", ONE_FAULT, f"hydra.sweep.dir={sweep}", code=1)
        # nothing half-written is left where the disk filled: the partial folder removed
        assert not glob.glob(f"{full}/**/*{paths.PARTIAL_SUFFIX}", recursive=True)
    ends = {}   # each point's fault -> its repeat's (status, error)
    for path in glob.glob(f"{sweep}/points/*/repeat-00/run.json"):
        spec = json.load(open(os.path.join(os.path.dirname(path), "spec.json")))
        fault = (spec["config"]["checkpoint"]["dir"], spec["bench_options"]["drop_shard_rank"],
                 spec["bench_options"]["corrupt_rank"])
        run = json.load(open(path))
        ends[fault] = (run["status"], run["error"])
    assert {fault: status for fault, (status, _) in ends.items()} == {
        (str(ro), None, None): "unwritable", (str(full), None, None): "disk_full",
        (None, 1, None): "missing_shard", (None, None, 0): "failed"}
    why = dict(ends.values())   # status -> error
    assert "[Errno 28] No space left on device" in why["disk_full"] and str(full) in why["disk_full"]
    assert "[Errno 30] Read-only file system" in why["unwritable"] and str(ro) in why["unwritable"]
    assert "No such file or directory" in why["missing_shard"] and "__1_0.distcp" in why["missing_shard"]
    assert "CheckpointMismatch" in why["failed"] and "differs from the one it saved" in why["failed"]
    # a failed repeat is never a speed
    table = report_checkpoint.checkpoint_table(load(sweep))
    assert sorted(table.status) == ["disk_full", "failed", "missing_shard", "unwritable"]
    assert table.gbps.isna().all()


def test_training_with_checkpoints_against_without(tmp_path):
    sweep = tmp_path / "train"
    _run("-m", "gpt_case_tiny=FSDP_2x1x1_8_64x4", "checkpoint.every=null,2", "checkpoint.mode=async",
         "warmup_steps=1", "measure_steps=4", "repeats=1", "launcher=local", "timeout_s=300",
         f"hydra.sweep.dir={sweep}")
    recs = _records(sweep)
    [every] = [p for p in recs if p.endswith("ckpt2-async")]
    for r in recs[every]:
        saves = r["checkpoint"]["saves"]
        # one after the warm-up step, then after timed steps 2 and 4
        assert [(s["step"], s["timed"]) for s in saves] == [(1, False), (3, True), (5, True)]
        assert all(s["bytes"] > 0 and s["durable_s"] >= s["blocked_s"] > 0 for s in saves)
    assert not os.path.exists(sweep / paths.CHECKPOINTS_DIR / every)   # removed after the repeat
    training = report_checkpoint.training_table(load(sweep))
    [row] = training.itertuples()
    assert (row.every, row.mode, row.saves) == (2, "async", 2)
    assert row.baseline and 0 < row.ratio and row.throughput > 0
