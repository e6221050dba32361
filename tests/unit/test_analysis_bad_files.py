"""A bad record file costs only its repeat: torn, foreign, garbage, newer, malformed.
The rest of the sweep is loaded and reported with the figures computed by hand."""
import json
import os
import subprocess
import sys

import pandas as pd
import pytest

import analysis
from analysis.report import contents as report
from tests.sweepfiles import write_point, write_repeat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONE, TWO, FOUR = ("000-pytorch-resnet50-fp32-1x1-bs8", "001-pytorch-resnet50-fp32-1x2-bs8",
                  "002-pytorch-resnet50-fp32-2x2-bs8")


@pytest.fixture
def sweep(tmp_path):
    s = str(tmp_path / "sweep")
    one = write_point(s, ONE)
    for r, w in enumerate([1.0, 0.8, 1.25]):  # 10 steps x 8 = 80 samples: 80, 100, 64 /s
        write_repeat(one, r, [w])
    two = write_point(s, TWO, gpus_per_node=2)
    for r, ws in enumerate([[0.9, 1.0], [1.25, 1.1], [0.5, 0.5]]):  # 160, 128, 320 /s
        write_repeat(two, r, ws)
    four = write_point(s, FOUR, nodes=2, gpus_per_node=2, repeats=1)
    write_repeat(four, 0, [1.0, 1.0, 1.0, 2.0])  # 320 samples / 2.0 s = 160 /s
    return s


def repeat_dir(sweep, point, repeat):
    return os.path.join(sweep, "points", point, f"repeat-{repeat:02d}")


def torn(path):
    text = open(path).read()
    open(path, "w").write(text[: len(text) // 2])


def foreign(path):
    json.dump({"schema": "someone.else", "version": 1, "steps": []}, open(path, "w"))


def garbage(path):
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n\x00\x00garbage")


def newer(path):
    rec = json.load(open(path))
    rec["version"] = 2
    json.dump(rec, open(path, "w"))


def malformed(path):
    rec = json.load(open(path))
    rec["steps"][3] = {"step": 3, "phase": "measure"}   # no times, no samples
    json.dump(rec, open(path, "w"))


def edit(**fields):
    def spoil(path):
        rec = json.load(open(path))
        rec.update(fields)
        json.dump(rec, open(path, "w"))
    return spoil


CASES = {  # how a file goes bad, which file, and what the error says why
    "torn rank record": (torn, "rank-00001.json", "corrupt record file", "truncated JSON"),
    "foreign schema": (foreign, "rank-00000.json", "corrupt record file",
                       "not a dlbench.rank record (schema 'someone.else')"),
    "garbage run.json": (garbage, "run.json", "corrupt record file", "not JSON"),
    "newer version": (newer, "rank-00001.json", "record file",
                      "dlbench.rank version 2 is newer than this analysis (knows 1)"),
    "malformed steps": (malformed, "rank-00000.json", "corrupt record file", "malformed: no 'start'"),
    "steps not a list": (edit(steps="many"), "rank-00001.json", "corrupt record file",
                         "malformed: field 'steps' is 'many'"),
    "rank out of its world": (edit(rank=7), "rank-00001.json", "corrupt record file",
                              "malformed: rank 7 in a world of 2"),
    "a rank twice": (edit(rank=0), "rank-00001.json", "corrupt record file",
                     "malformed: rank 0 twice"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_bad_file_costs_only_its_repeat(sweep, case):
    spoil, name, prefix, why = CASES[case]
    path = os.path.join(repeat_dir(sweep, TWO, 2), name)   # the 320/s repeat of 1x2
    spoil(path)
    res = analysis.load(sweep)
    runs = res.runs.set_index(["point", "repeat"])
    bad = runs.loc[(TWO, 2)]
    assert bad.status == "corrupt" and pd.isna(bad.throughput)
    assert bad.error.startswith(f"{prefix} {path}: ") and why in bad.error
    assert [(c["file"], c["point"], c["repeat"]) for c in res.corrupt] == [(path, TWO, 2)]
    assert why in res.corrupt[0]["reason"] and res.corrupt[0]["newer"] == (case == "newer version")
    assert (runs.drop(index=(TWO, 2)).status == "ok").all()
    p = res.points.set_index("point")
    # 1x1: 80, 100, 64 -> 80; 1x2 without its third repeat: 160, 128 -> 144; 2x2: 160
    assert p.loc[ONE].throughput == pytest.approx(80.0) and p.loc[ONE].status == "ok"
    assert p.loc[TWO].throughput == pytest.approx(144.0) and p.loc[TWO].status == "partial"
    assert (p.loc[TWO].n_ok, p.loc[TWO].n_recorded) == (2, 3)
    assert p.loc[TWO].speedup == pytest.approx(1.8) and p.loc[TWO].efficiency == pytest.approx(0.9)
    assert p.loc[FOUR].throughput == pytest.approx(160.0) and p.loc[FOUR].speedup == pytest.approx(2.0)
    text = report.render(res)
    assert "144.0*" in text and "| 80.0 " in text and "160.0" in text
    failures = text.split("## Failed, cut short or missing")[1]
    assert f"- {TWO} repeat 2: corrupt: {prefix} {path}: " in failures
    assert f"Corrupt files (1)" in failures and f"- {path}: " in failures


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_report_lists_every_corrupt_file_and_exits_1(sweep, tmp_path):
    torn(os.path.join(repeat_dir(sweep, ONE, 1), "rank-00000.json"))
    garbage(os.path.join(repeat_dir(sweep, FOUR, 0), "run.json"))
    newer(os.path.join(repeat_dir(sweep, FOUR, 0), "rank-00003.json"))
    out = run_cli("report", sweep, "--no-plot", "--out", str(tmp_path / "rep"))
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0
    assert "3 corrupt record file(s)" in out.stderr
    # 1x1 without its repeat 1: 80, 64 -> 72; 2x2: every repeat corrupt -> the point is
    assert "| 72.0* " in out.stdout and "CORRUPT" in out.stdout
    assert out.stdout.count(f"\n- {sweep}/points/") == 3 and "Corrupt files (3)" in out.stdout
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith(f"- {FOUR} repeat 0: corrupt: "))
    assert "rank-00003.json: dlbench.rank version 2 is newer than this analysis" in line
    assert "run.json: not JSON" in line   # both of its bad files
    for f in ("points.csv", "runs.csv", "steps.parquet"):
        assert (tmp_path / "rep" / f).stat().st_size > 0
    p = analysis.load(sweep).points.set_index("point")
    assert p.loc[FOUR].status == "corrupt" and p.loc[ONE].throughput == pytest.approx(72.0)


def test_a_clean_sweep_exits_0_and_no_sweep_exits_2(sweep, tmp_path):
    out = run_cli("report", sweep, "--no-plot")
    assert out.returncode == 0 and "Corrupt files" not in out.stdout and not out.stderr
    empty = run_cli("report", str(tmp_path / "nothing"))
    assert empty.returncode == 2 and empty.stderr.startswith("error: no results folder at")
    assert empty.stderr.strip().count("\n") == 0


def test_a_corrupt_point_json_costs_its_point(sweep):
    garbage(os.path.join(sweep, "points", TWO, "point.json"))
    res = analysis.load(sweep)
    assert list(res.points.point) == [ONE, FOUR]
    assert [c["file"] for c in res.corrupt] == [os.path.join(sweep, "points", TWO, "point.json")]
    text = report.render(res)
    assert "Corrupt files (1)" in text and "| 80.0 " in text


def test_a_corrupt_search_ledger_costs_its_search(sweep):
    os.makedirs(os.path.join(sweep, "searches"))
    path = os.path.join(sweep, "searches", "003.json")
    foreign(path)
    res = analysis.load(sweep)
    assert res.searches == [] and [c["file"] for c in res.corrupt] == [path]
    assert res.points.set_index("point").loc[ONE].throughput == pytest.approx(80.0)


def test_a_failed_repeat_keeps_its_log_tail_beside_corrupt_ones(sweep):
    path = os.path.join(repeat_dir(sweep, ONE, 0), "run.json")
    run = json.load(open(path))
    run.update(status="failed", error="rank 0 left no record: killed by SIGSEGV",
               log_tail={"rank": 0, "lines": ["loading", "about to crash"]})
    json.dump(run, open(path, "w"))
    torn(os.path.join(repeat_dir(sweep, ONE, 1), "rank-00000.json"))
    text = report.render(analysis.load(sweep))
    assert f"- {ONE} repeat 0: failed: rank 0 left no record: killed by SIGSEGV" in text
    assert "  rank 0's log, last 2 lines:\n    loading\n    about to crash" in text
    assert f"- {ONE} repeat 1: corrupt: corrupt record file" in text


def test_an_ok_repeat_without_all_its_rank_records_is_corrupt(sweep):
    os.remove(os.path.join(repeat_dir(sweep, TWO, 2), "rank-00001.json"))
    res = analysis.load(sweep)
    bad = res.runs.set_index(["point", "repeat"]).loc[(TWO, 2)]
    assert bad.status == "corrupt" and os.path.join(repeat_dir(sweep, TWO, 2), "run.json") in bad.error
    assert "it says ok, but 1 of 2 rank records are missing" in bad.error
    assert res.points.set_index("point").loc[TWO].throughput == pytest.approx(144.0)
