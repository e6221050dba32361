"""Results over time (analysis/store/history.py) on two constructed sweeps with known figures."""
import json
import os

import pytest

import analysis
from analysis.store import history
from contract import paths, records
from tests.sweepfiles import write_point, write_repeat


def sweep(root, name, created, commit, windows_per_repeat):
    """One point (pytorch resnet50, 1 rank, batch 8, 10 timed steps a repeat): repeat k's
    throughput is 80 / windows_per_repeat[k] samples/s."""
    folder = os.path.join(root, name)
    point = write_point(folder, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=len(windows_per_repeat))
    for k, window in enumerate(windows_per_repeat):
        write_repeat(point, k, [window])
    path = os.path.join(point["dir"], paths.POINT_FILE)
    with open(path) as f:
        data = json.load(f)
    records.write_json_atomic(path, dict(data, created_unix=created, suite_commit=commit))


def test_history_orders_sweeps_and_flags_a_change_beyond_the_spread(tmp_path):
    sweep(tmp_path, "b-later", 2_000_000_000, "bbbbbbbbbbbbbbbb", [0.8, 1.0, 0.9])  # 100, 80, 88.9
    sweep(tmp_path, "a-first", 1_000_000_000, "aaaaaaaaaaaaaaaa", [1.0, 1.0, 1.0])  # 80, 80, 80
    sweep(tmp_path, "c-last", 2_100_000_000, "cccccccccccccccc", [0.4, 0.4, 0.5])   # 200, 200, 160
    table = history.history(analysis.load(tmp_path, merge=True))
    assert [os.path.basename(s) for s in table.sweep] == ["a-first", "b-later", "c-last"]
    assert list(table.suite_commit) == ["aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc"]
    assert table.throughput.round(3).tolist() == [80.0, 88.889, 200.0]
    assert table.change.iloc[0] != table.change.iloc[0]  # NaN: nothing before the first
    assert round(table.change.iloc[1], 4) == round(88.889 / 80 - 1, 4)
    assert round(table.change.iloc[2], 4) == round(200 / 88.889 - 1, 4)
    # b's range 80..100 overlaps a's 80..80: within the spread; c's 160..200 is beyond b's
    assert list(table.beyond_spread.iloc[1:]) == [False, True]
    assert table.date.iloc[0] == "2001-09-09 01:46" and table.framework_version.iloc[0] == "9.9"
    text = history.render(table)
    assert "+125.0% !" in text and "+11.1%" in text and "+11.1% !" not in text


def test_the_history_command(tmp_path, capsys):
    from analysis.__main__ import main
    sweep(tmp_path, "a", 1_000_000_000, "aaaa", [1.0])
    sweep(tmp_path, "b", 1_000_000_100, "bbbb", [0.5])
    assert main(["history", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "## pytorch resnet50 (tiny) fp32 1x1 bs8" in out and "+100.0% !" in out
    assert main(["history", str(tmp_path / "nothing")]) == 2


def test_speedup_divides_by_its_own_sweeps_baseline(tmp_path):
    """Two sweeps of one configuration in a folder: 1 rank at 80 and 40 samples/s, 2 ranks
    at 120 and 60 (2 ranks x 8 x 10 steps over 4/3 s and 8/3 s). Each speedup is 1.5, over
    its own sweep's baseline, not 120/60 or 60/60 over the median of both (60)."""
    for name, one, two in (("a", 1.0, 4 / 3), ("b", 2.0, 8 / 3)):
        folder = os.path.join(tmp_path, name)
        p1 = write_point(folder, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=1)
        write_repeat(p1, 0, [one])
        p2 = write_point(folder, "001-pytorch-resnet50-fp32-1x2-bs8", gpus_per_node=2, repeats=1)
        write_repeat(p2, 0, [two, two])
    # a third sweep with only 2 ranks borrows the median of the others' baselines (60)
    p3 = write_point(os.path.join(tmp_path, "c"), "001-pytorch-resnet50-fp32-1x2-bs8",
                     gpus_per_node=2, repeats=1)
    write_repeat(p3, 0, [4 / 3, 4 / 3])
    points = analysis.load(tmp_path, merge=True).points
    two = points[points.devices == 2].set_index(points[points.devices == 2].sweep.map(os.path.basename))
    assert two.speedup["a"] == pytest.approx(1.5) and two.speedup["b"] == pytest.approx(1.5)
    assert two.speedup["c"] == pytest.approx(2.0)


def test_the_history_tables_are_tabulates():
    """tables.github writes what tabulate's github format writes, faster (analysis/tables.py)."""
    from tabulate import tabulate

    from analysis import tables
    headers = ["date", "sweep", "commit", "framework", "device", "throughput (min..max)", "change"]
    rows = [["2026-09-21 00:00", "A", "c0ffee", "9.9", "cpu", "80.0 (80.0..80.0)", ""],
            ["", "a-much-longer-sweep-name", "", None, "NVIDIA H100 80GB HBM3", "1.5 (1.0..2.0)", "+25.0% !"]]
    for some in (rows, rows[:1], []):
        assert tables.github(some, headers) == tabulate(some, headers=headers, tablefmt="github",
                                                        disable_numparse=True)
