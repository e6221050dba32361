"""Rank records read by two processes (analysis/read/ahead.py) load the same as read by one:
every point's and run's figures, every step, the corrupt files; also when the second process
dies; and the step columns' owners give each step's point, repeat, rank and host."""
import os

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis.read import ahead as read_ahead
from analysis.read import record_file
from analysis.read.results import Results
from tests.sweepfiles import write_point, write_repeat


@pytest.fixture
def sweep(tmp_path):
    s = str(tmp_path / "sweep")
    for n, ranks in enumerate((3, 40, 17)):   # chunks of 8 records: some split across points
        point = write_point(s, f"00{n}-pytorch-resnet50-fp32-1x{ranks}-bs8", gpus_per_node=ranks,
                            repeats=2)
        for repeat in range(2):
            write_repeat(point, repeat, [1.0 + 0.01 * r + 0.1 * repeat for r in range(ranks)],
                         steps=5 + n)
    bad = os.path.join(s, "points", "001-pytorch-resnet50-fp32-1x40-bs8", "repeat-01", "rank-00011.json")
    with open(bad, "w") as f:
        f.write('{"schema": "dlbench.rank", "version": 1, "steps": [')   # torn
    return s


def _same(a, b):
    pd.testing.assert_frame_equal(a.points, b.points)
    pd.testing.assert_frame_equal(a.runs, b.runs)
    pd.testing.assert_frame_equal(a.steps, b.steps)
    assert a.corrupt == b.corrupt and a.environments == b.environments


def test_two_processes_read_what_one_reads(sweep, monkeypatch):
    alone = analysis.load(sweep)
    monkeypatch.setattr(read_ahead, "MIN_BYTES", 0)
    ahead = analysis.load(sweep, ahead_ok=True)
    _same(alone, ahead)
    assert len(ahead.corrupt) == 1 and ahead.corrupt[0]["file"].endswith("rank-00011.json")
    assert len(ahead.steps) == 2 * (3 * 6 + 40 * 7 + 17 * 8) - 7   # less the torn record's


def test_what_the_second_process_never_sent_is_read_here(sweep, monkeypatch):
    parent, read = os.getpid(), record_file.rank_record

    def dies_in_the_child(path):
        if os.getpid() != parent:
            os._exit(3)            # as if killed, its claim unsent
        return read(path)

    alone = analysis.load(sweep)
    monkeypatch.setattr(read_ahead, "MIN_BYTES", 0)
    monkeypatch.setattr(record_file, "rank_record", dies_in_the_child)
    _same(alone, analysis.load(sweep, ahead_ok=True))


def test_owners_give_each_steps_point_repeat_rank_and_host():
    rng = np.random.default_rng(1)
    counts = rng.integers(0, 5, 40)
    counts[[0, 3, 39]] = 0     # records without steps, first and last included
    owners = np.stack([rng.integers(0, 3, 40), rng.integers(0, 4, 40), np.arange(40),
                       rng.integers(0, 2, 40), counts], 1)
    n = int(counts.sum())
    res = Results(None, None, step_columns={"step": np.arange(n), "owners": owners,
                                            "point_names": ["a", "b", "c"], "host_names": ["h", "i"]})
    for column, field in enumerate(("point", "repeat", "rank", "host")):
        whole = res._owners(field)
        assert list(whole) == [v for v, c in zip(owners[:, column], counts) for _ in range(c)]
        for a in range(n + 1):
            for b in range(a, n + 1):
                assert list(res._owners(field, steps=slice(a, b))) == list(whole[a:b])


def test_records_the_second_process_read_are_the_records(sweep):
    from analysis.read.load import find_points
    import time
    paths, _ = read_ahead.rank_records(find_points(sweep))
    ahead = read_ahead.Ahead(paths)
    try:
        deadline = time.time() + 60          # the second process reads ahead of any asking
        while list(ahead._owner).count(read_ahead.THEIRS) < 2 and time.time() < deadline:
            time.sleep(0.01)
        assert list(ahead._owner).count(read_ahead.THEIRS) >= 2
        for path in paths:
            try:
                slim, cols = ahead.take(path)
            except record_file.CorruptFile as exc:
                with pytest.raises(record_file.CorruptFile, match="truncated JSON"):
                    record_file.rank_record(path)
                assert exc.path == path and "truncated JSON" in exc.reason
                continue
            want_slim, want = record_file.rank_record(path)
            assert slim == want_slim and cols.keys() == want.keys()
            assert all(np.array_equal(cols[k], want[k], equal_nan=True) for k in want)
    finally:
        ahead.close()


@pytest.mark.parametrize("argv, starts", [
    (["python", "-m", "analysis", "report", "SWEEP"], True),
    (["python", "-X", "dev", "-m", "analysis", "report", "--out", "O", "--no-plot", "SWEEP"], True),
    (["python", "-m", "analysis", "report", "--max-cv=0.1", "SWEEP", "--html", "h.html"], True),
    (["python", "-m", "analysis", "report", "-h", "SWEEP"], False),
    (["python", "-m", "analysis", "history", "SWEEP"], False),
    (["python", "-m", "pytest", "SWEEP"], False),
    (["python", "-m", "analysis", "report", "no-such-folder"], False)])
def test_the_report_command_starts_reading_as_the_package_imports(sweep, monkeypatch, argv, starts):
    """`python -m analysis report PATH` (sys.orig_argv, seen as analysis/__init__.py
    imports) starts a reader of PATH's records; load() takes it over, reading the same."""
    monkeypatch.setattr(read_ahead, "MIN_BYTES", 0)
    alone = analysis.load(sweep)
    read_ahead.start_early([sweep if a == "SWEEP" else a for a in argv])
    early = read_ahead._early
    try:
        assert (early is not None) == starts
        if starts:   # load() reads with the reader started early, no other
            monkeypatch.setattr(read_ahead, "Ahead", None)
        ahead = analysis.load(sweep, ahead_ok=True)
        assert read_ahead._early is None       # taken over (or never there)
        _same(alone, ahead)
    finally:
        if early is not None:
            early.close()
        read_ahead._early = None


def test_the_early_reader_knows_which_report_options_take_a_value():
    """read_ahead finds PATH on the command line before argparse runs: the options it skips
    with their value are the report command's own that take one."""
    import argparse

    from analysis.__main__ import report_arguments
    parser = argparse.ArgumentParser()
    report_arguments(parser)
    valued = {a.option_strings[-1] for a in parser._actions if a.option_strings and a.nargs != 0}
    assert valued - {"--help"} == set(read_ahead._VALUED)
