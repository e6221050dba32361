"""Checkpoints (docs/checkpoint.md), their rules against figures by hand: the storage endings
and their names, the settings and their one-line refusals, the folders, the bare file
operations, the classification of DCP's gathered failures, the state's digest, and the
report's figures (slowest rank, bytes summed, GB/s, per node, ratio to the bare write)."""
import errno
import os

import pytest
import torch

from analysis import load
from analysis.figures import checkpoint as report_checkpoint
from analysis.figures import training
from analysis.plots import data as plot_data
from analysis.plots import draw as plot
from analysis.published import sources
from analysis.sections import checkpoint as checkpoint_section
from contract import checkpoint, paths, records, statuses
from frameworks.common import bare_io, harness
from frameworks.common.session import Session
from frameworks.common.distenv import DistEnv
from frameworks.pytorch.checkpoint import dcp as dcp_checkpoint
from launchers.plan import points
from tests.runspecs import run_spec, stand_in
from tests.sweepfiles import write_point, write_repeat
from tests.unit.test_points import cfg_of


# ---- how a checkpoint's storage ends a rank ------------------------------------------------
@pytest.mark.parametrize("code, reading, ending", [
    (errno.ENOSPC, False, statuses.DiskFull), (errno.EDQUOT, False, statuses.DiskFull),
    (errno.EROFS, False, statuses.Unwritable), (errno.EACCES, False, statuses.Unwritable),
    (errno.ENOENT, True, statuses.MissingShard), (errno.ENOENT, False, None),
    (errno.EIO, False, None), (errno.ENOSPC, True, None)])
def test_which_errno_names_which_ending(code, reading, ending):
    assert statuses.storage_ending(code, reading) is ending


def test_storage_endings_are_statuses_worse_than_a_timeout():
    assert [c.status for c in (statuses.Unwritable, statuses.DiskFull, statuses.MissingShard)] == \
        ["unwritable", "disk_full", "missing_shard"]
    assert statuses.point_status(["timeout", "disk_full"], 2) == "disk_full"
    assert statuses.point_status(["failed", "missing_shard"], 2) == "failed"
    assert statuses.point_status(["ok", "unwritable"], 2) == "partial"


def test_the_harness_records_a_storage_ending_by_its_name():
    class Full(Session):
        def run_bench(self, spec, record, origin):
            raise statuses.DiskFull("saving /x (rank 0): [Errno 28] No space left on device")

    rec, _ = harness.run(stand_in(lambda s, d: Full()), run_spec(), DistEnv(0, 1, 0, 1, "h", 1))
    assert rec["status"] == "disk_full"
    assert rec["error"] == "DiskFull: saving /x (rank 0): [Errno 28] No space left on device"


# ---- the settings -------------------------------------------------------------------------
def test_settings_and_the_names_they_give(tmp_path):
    assert checkpoint.settings({}) == checkpoint.Checkpoint(None, "sync", None, False)
    s = checkpoint.settings({"checkpoint": {"dir": "ck", "mode": "async", "every": 10}})
    assert s.dir == os.path.abspath("ck") and s.every == 10
    assert s.label("train") == "ckpt10-async" and s.label("checkpoint") == "ckpt-async"
    assert checkpoint.Checkpoint().label("train") == ""


@pytest.mark.parametrize("given, line", [
    ({"mode": "fast"}, "checkpoint.mode must be sync or async, got 'fast'"),
    ({"every": 0}, "checkpoint.every must be an integer >= 1, got 0"),
    ({"keep": "yes"}, "checkpoint.keep must be true or false, got 'yes'"),
    ({"dir": ""}, "checkpoint.dir must be a folder's path or null, got ''"),
    ({"interval": 3}, "checkpoint: unknown key(s) interval (valid: dir, mode, every, keep)")])
def test_a_bad_setting_is_one_line(given, line):
    with pytest.raises(ValueError) as err:
        checkpoint.settings({"checkpoint": given})
    assert str(err.value) == line


def test_bench_options():
    assert checkpoint.bench_options({"name": "checkpoint"}) == checkpoint.BenchOptions()
    with pytest.raises(ValueError, match="bench.warmup_saves must be an integer >= 0, got -1"):
        checkpoint.bench_options({"warmup_saves": -1})
    with pytest.raises(ValueError, match=r"unknown option\(s\) saves for bench=checkpoint"):
        checkpoint.bench_options({"saves": 3})


def test_points_name_and_refuse(tmp_path):
    point = points.make_point(cfg_of("bench=checkpoint", "gpt_case_tiny=FSDP_2x1x1_8_64x4",
                                     "checkpoint.mode=async", "checkpoint.dir=ck"), tmp_path, 3)
    assert point.name == "003-checkpoint-pytorch-gpt-fp32-1x2-bs4-fsdp-ckpt-async"
    assert point.config.checkpoint.dir == os.path.abspath("ck")
    train = points.make_point(cfg_of("gpt_case_tiny=FSDP_2x1x1_8_64x4", "checkpoint.every=5"), tmp_path, 4)
    assert train.name == "004-pytorch-gpt-fp32-1x2-bs4-fsdp-ckpt5-sync"
    for overrides, line in (
            (["bench=comm", "checkpoint.every=5"], "checkpoint.every applies to bench=train, not bench=comm"),
            (["framework=jax", "checkpoint.every=5"], "checkpoint.every is built for framework=pytorch, not jax"),
            (["checkpoint.mode=lazy"], "checkpoint.mode must be sync or async, got 'lazy'"),
            (["bench=checkpoint", "bench.drop_cache=1"], "bench.drop_cache must be true or false, got 1")):
        with pytest.raises(points.ConfigError) as err:
            points.make_point(cfg_of(*overrides), tmp_path, 0)
        assert str(err.value).startswith(line), str(err.value)


def test_where_a_repeats_checkpoints_go():
    rdir = paths.repeat_dir(paths.point_dir("/s/sweep-1", "000-x"), 2)
    assert paths.checkpoint_root(rdir) == "/s/sweep-1/checkpoints/000-x/repeat-02"
    assert paths.checkpoint_root(rdir, "/lustre/ck") == "/lustre/ck/sweep-1/000-x/repeat-02"
    assert paths.checkpoint_name(12) == "step-000012" and paths.bare_file_name(3) == "bare-00003.bin"


# ---- the bare write and read --------------------------------------------------------------
def test_bare_write_read_and_sizes(tmp_path):
    path = str(tmp_path / "b.bin")
    assert bare_io.write_file(path, b"abc", 10) == 10
    assert open(path, "rb").read() == b"abcabcabca"     # the chunk repeated to the size
    assert bare_io.read_file(path, bare_io.buffer(10)) == 10
    assert bare_io.read_file(path, bytearray(3)) == 10   # through a buffer smaller than the file
    assert bare_io.drop_cache(path) in (True, False)
    bare_io.fsync_dir(str(tmp_path))
    (tmp_path / "__0_0.distcp").write_bytes(b"x" * 7)
    assert bare_io.folder_bytes(str(tmp_path)) == 17
    assert bare_io.folder_bytes(str(tmp_path), "__0_") == 7
    bare_io.remove(str(tmp_path / "b.bin"))
    bare_io.remove(str(tmp_path / "b.bin"))           # gone already: no error
    assert not os.path.exists(path)


# ---- DCP's failures, named --------------------------------------------------------------------
def _gathered(failures):
    from torch.distributed.checkpoint.api import CheckpointException
    return CheckpointException("write", {r: (e, None) for r, e in failures.items()})


def test_a_gathered_failure_is_named_by_its_errno_and_rank():
    full = OSError(errno.ENOSPC, "No space left on device")
    name, text = dcp_checkpoint.describe(_gathered({1: full}), "saving /c/step-000000.partial", 0)
    assert (name, text) == ("DiskFull", "saving /c/step-000000.partial (rank 1): [Errno 28] No space left on device")
    wrapped = RuntimeError("unexpected pos 704 vs 598")
    wrapped.__context__ = OSError(errno.EROFS, "Read-only file system")
    assert dcp_checkpoint.describe(_gathered({0: wrapped}), "saving", 0)[0] == "Unwritable"
    gone = FileNotFoundError(errno.ENOENT, "No such file or directory", "/c/__1_0.distcp")
    assert dcp_checkpoint.describe(_gathered({0: gone}), "loading", 0, reading=True)[0] == "MissingShard"
    assert dcp_checkpoint.describe(gone, "saving", 2) == (
        "CheckpointFailed", "saving (rank 2): FileNotFoundError: [Errno 2] No such file or directory: "
                            "'/c/__1_0.distcp'")


def test_together_alone_raises_the_ending():
    assert dcp_checkpoint.together(None, 0, "x", lambda: 5) == 5
    with pytest.raises(statuses.DiskFull, match=r"writing /b \(rank 0\): \[Errno 28\]"):
        dcp_checkpoint.together(None, 0, "writing /b", lambda: (_ for _ in ()).throw(
            OSError(errno.ENOSPC, "No space left on device")))


def test_the_digest_sees_every_value():
    state = {"model": {"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(())},
             "optim": {"param_groups.w.lr": 0.1}}
    before = dcp_checkpoint.digest(state)
    assert sorted(before) == ["model.b", "model.w", "optim.param_groups.w.lr"]
    state["model"]["w"][1, 2] += 1
    state["optim"]["param_groups.w.lr"] = 0.2
    assert dcp_checkpoint.differences(before, dcp_checkpoint.digest(state)) == \
        ["model.w", "optim.param_groups.w.lr"]


# ---- the report's figures ---------------------------------------------------------------------
RANKS = [  # two ranks on two nodes, figures chosen for arithmetic by hand
    {"bytes": 3_000_000_000, "blocked_s": 0.5, "durable_s": 2.0, "load_s": 1.0, "bare_bytes": 3_000_000_000,
     "bare_write_s": 0.5, "bare_read_s": 0.25},
    {"bytes": 1_000_000_000, "blocked_s": 0.25, "durable_s": 4.0, "load_s": 2.0, "bare_bytes": 1_000_000_000,
     "bare_write_s": 1.0, "bare_read_s": 0.5}]


def test_a_repeats_figures_by_hand():
    f = report_checkpoint.repeat_figures(RANKS, nodes=2)
    # 4e9 bytes, slowest durable 4 s: 1 GB/s in all, 0.5 per node; bare: 4e9 in 1 s = 4 GB/s
    assert (f["bytes"], f["blocked_s"], f["durable_s"], f["load_s"]) == (4e9, 0.5, 4.0, 2.0)
    assert f["gbps"] == pytest.approx(1.0) and f["gbps_per_node"] == pytest.approx(0.5)
    assert f["bare_gbps"] == pytest.approx(4.0) and f["ratio"] == pytest.approx(0.25)
    # the load: 4e9 in 2 s = 2 GB/s; the bare read 4e9 in 0.5 s = 8 GB/s
    assert f["load_gbps"] == pytest.approx(2.0) and f["load_ratio"] == pytest.approx(0.25)


def _checkpoint_point(sweep, name, scale, repeats=3):
    pt = write_point(str(sweep), name, model="gpt", nodes=2, gpus_per_node=1, repeats=repeats,
                     config={"checkpoint": {"mode": "sync"}})
    pt["bench"], pt["parallel"] = "checkpoint", {"dp": 2, "tp": 1, "pp": 1, "fsdp": True}
    records.write_json_atomic(os.path.join(pt["dir"], paths.POINT_FILE), pt)
    for repeat, k in enumerate(scale):
        write_repeat(pt, repeat, [1.0, 1.0], steps=1, fields=lambda r: {
            "checkpoint": {**RANKS[r], "durable_s": RANKS[r]["durable_s"] * k}})
    return pt


def test_the_table_takes_the_median_of_repeats_and_the_plot_draws_it(tmp_path):
    _checkpoint_point(tmp_path, "000-checkpoint-gpt", [1.0, 2.0, 0.5])   # durable 4, 8, 2 s
    results = load(tmp_path)
    [row] = report_checkpoint.checkpoint_table(results).itertuples()
    assert (row.n_ok, row.durable_s, row.gbps) == (3, 4.0, pytest.approx(1.0))
    assert (row.layout, row.mode, row.ratio) == ("dp2, fsdp", "sync", pytest.approx(0.25))
    text = checkpoint_section.section(results)
    assert "### gpt, dp2, fsdp" in text and "| 000-checkpoint-gpt" in text
    assert "pytorch.org/blog" not in text and "PyTorch blog" in text   # the published, by source
    plots, _ = plot.render(plot_data.of(results), only=("checkpoint",))
    assert [p.name for p in plots] == ["checkpoint.png"] and plots[0].png.startswith(b"\x89PNG")


def test_published_rows_say_their_source():
    rows = sources.checkpoint_rows()
    assert rows and all(r["source"] and r["url"].startswith("https://") and r["date"] for r in rows)
    blog = [r for r in rows if "reducing-checkpointing-times" in r["url"]]
    assert sorted((r["mode"], r["blocked_s"]) for r in blog) == [("async", 6.3), ("sync", 148.8)]


def test_training_with_checkpoints_is_its_own_configuration(tmp_path):
    """Its speedup is over its own 1-device point, and it stays out of the main tables."""
    every = {"checkpoint": {"every": 5, "mode": "sync"}}
    for name, devices, window, config in (("000-a", 1, 1.0, None), ("001-a", 2, 1.0, None),
                                          ("002-a-ckpt5-sync", 1, 2.0, every),
                                          ("003-a-ckpt5-sync", 2, 2.0, every)):
        pt = write_point(str(tmp_path), name, gpus_per_node=devices, repeats=1, config=config)
        write_repeat(pt, 0, [window] * devices)
    pts = load(tmp_path).points.set_index("point")
    # 2 ranks x 8 samples x 10 steps in 1 s (2 s): 160 (80) samples/s; 1 rank: 80 (40)
    assert pts.loc["001-a", "speedup"] == pytest.approx(2.0)
    assert pts.loc["003-a-ckpt5-sync", "speedup"] == pytest.approx(2.0)
    assert pts.loc["002-a-ckpt5-sync", "checkpoint"] == "every 5 sync"
    assert sorted(training.training_points(load(tmp_path)).point) == ["000-a", "001-a"]
