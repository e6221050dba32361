"""A second process reads a share of the rank records (analysis/read_ahead.py): the results
are the same, bad files included, whichever process read each file, and the same when that
process dies."""
import os
import signal

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis import helper_process, read_ahead
from analysis.load import find_points, rank_files
from tests.sweepfiles import write_point, write_repeat

BIG = "000-pytorch-resnet50-fp32-20x8-bs8"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One point of 160 ranks, 2 repeats (320 rank records: 10 chunks), the last rank of
    repeat 1 torn (in the worker's share: it reads from the last chunk back)."""
    s = str(tmp_path_factory.mktemp("ahead") / "sweep")
    pt = write_point(s, BIG, nodes=20, gpus_per_node=8, repeats=2)
    for r in range(2):
        write_repeat(pt, r, [1.0 + 0.001 * k for k in range(160)], steps=3)
    path = os.path.join(s, "points", BIG, "repeat-01", "rank-00159.json")
    text = open(path).read()
    open(path, "w").write(text[: len(text) // 2])
    return s


def same(a, b) -> None:
    pd.testing.assert_frame_equal(a.points, b.points)
    pd.testing.assert_frame_equal(a.runs, b.runs)
    pd.testing.assert_frame_equal(a.steps, b.steps)
    assert a.corrupt == b.corrupt and a.environments == b.environments


def test_the_worker_reads_from_the_last_chunk_back_what_this_process_has_not(sweep):
    paths = rank_files(find_points(sweep))
    assert len(paths) == 320 and paths[0].endswith("repeat-00/rank-00000.json")
    helper = helper_process.Helper(plots=False)
    try:
        ahead = read_ahead.ReadAhead(helper.pool, paths)
        last = ahead._where[paths[-1]][0]
        last.result(timeout=60)      # the worker began with the last chunk
        got = [ahead.take(p) for p in paths]
    finally:
        helper.close()
    by_worker = [p for p, g in zip(paths, got) if g is not None]
    assert paths[-read_ahead.CHUNK:] == by_worker[-read_ahead.CHUNK:]
    assert not any(g is not None for g in got[:read_ahead.CHUNK])   # the first chunk: here
    for p, g in zip(paths, got):   # what the worker read is what this process reads
        if g is None:
            continue
        mine = read_ahead.parse([p])[0]
        if isinstance(mine, analysis.CorruptFile):
            assert (g.path, g.reason, g.newer) == (mine.path, mine.reason, mine.newer)
        else:
            assert g[0] == mine[0] and all(np.array_equal(g[1][k], mine[1][k]) for k in mine[1])
    assert isinstance(got[-1], analysis.CorruptFile) and "truncated JSON" in got[-1].reason


def test_load_with_a_second_process_gives_the_same_results(sweep):
    helper = helper_process.Helper(plots=False)
    try:
        both = analysis.load(sweep, pool=helper.pool)
    finally:
        helper.close()
    alone = analysis.load(sweep)
    same(alone, both)
    assert alone.runs.set_index("repeat").status.to_dict() == {0: "ok", 1: "corrupt"}
    assert [c["file"].endswith("rank-00159.json") for c in both.corrupt] == [True]


def test_a_dead_worker_costs_only_time(sweep):
    helper = helper_process.Helper(plots=False)
    try:
        helper.pool.submit(int).result(timeout=60)     # the worker is up
        worker = next(iter(helper.pool._processes.values()))
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(timeout=30)
        res = analysis.load(sweep, pool=helper.pool)
    finally:
        helper.close()
    same(analysis.load(sweep), res)


def test_a_small_sweep_is_read_here(tmp_path):
    pt = write_point(str(tmp_path), "000-x", repeats=1)
    write_repeat(pt, 0, [1.0])
    helper = helper_process.Helper(plots=False)
    try:
        ahead = read_ahead.ReadAhead(helper.pool, [os.path.join(pt["dir"], "x")] * 10)
        assert ahead.take(os.path.join(pt["dir"], "x")) is None   # under MIN_FILES: here
    finally:
        helper.close()
    assert np.isclose(analysis.load(str(tmp_path)).points.throughput.iloc[0], 80.0)
