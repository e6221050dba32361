"""Repeats: each runs once, a rerun or requeue skips what is recorded, an interrupted
attempt is set aside whole."""
import json
import os
from types import SimpleNamespace

from contract import spec as specs
from contract import paths, records
from launchers import sweepdir
from launchers.driver import repeats
from launchers.plan import points
from tests.unit.test_points import cfg_of


def make(tmp_path, repeats=3):
    point = points.make_point(cfg_of("preset=smoke", f"repeats={repeats}"), tmp_path, 0)
    sweepdir.write_point(point)
    return point


def launcher(start):
    """A launcher object whose repeats start with `start(point, spec_path, rdir)`."""
    return SimpleNamespace(start_repeat=start)


def writer(calls, status="ok"):
    """A start function whose single rank writes its record, as a worker would."""
    def start(point, spec_path, rdir):
        calls.append(specs.read(spec_path).repeat)
        records.write_json_atomic(os.path.join(rdir, paths.rank_record_name(0)),
                                  {"status": status, "error": None if status == "ok" else "x"})
        return {0: {"exit_code": 0}}, None
    return start


def test_each_repeat_runs_once_and_rerun_skips(tmp_path):
    point = make(tmp_path)
    calls = []
    assert repeats.run_point(point.dir, launcher(writer(calls)), log=lambda m: None) == ["ok"] * 3
    assert repeats.run_point(point.dir, launcher(writer(calls)), log=lambda m: None) == ["ok"] * 3
    assert calls == [0, 1, 2]


def test_requeue_resumes_after_the_last_recorded_repeat(tmp_path):
    point = make(tmp_path)
    calls = []
    repeats.run_repeat(point, 0, launcher(writer(calls)))
    # repeat 1 was cut short: a rank record but no run.json
    rdir = point.repeat_dir(1)
    os.makedirs(rdir)
    open(os.path.join(rdir, "rank-00000.log"), "w").write("partial")
    repeats.run_point(point.dir, launcher(writer(calls)), log=lambda m: None)
    assert calls == [0, 1, 2]
    aside = [d for d in os.listdir(point.dir) if ".interrupted-" in d]
    assert len(aside) == 1 and aside[0].startswith("repeat-01")


def test_run_json_carries_status_and_timeout_wins(tmp_path):
    point = make(tmp_path, repeats=1)
    run = repeats.run_repeat(point, 0, launcher(lambda p, s, r: ({0: {"exit_code": None, "stopped": True}},
                                                                 "timeout")))
    assert run["status"] == "timeout"
    with open(os.path.join(point.repeat_dir(0), "run.json")) as f:
        assert json.load(f)["status"] == "timeout"


def test_missing_rank_record_fails_the_repeat(tmp_path):
    point = make(tmp_path, repeats=1)
    run = repeats.run_repeat(point, 0, launcher(lambda p, s, r: ({0: {"exit_code": 0}}, None)))
    assert run["status"] == "failed" and run["error"] == "no record from rank(s) 0"


def test_a_rank_killed_without_a_record_is_named_with_its_signal_and_log(tmp_path):
    point = make(tmp_path, repeats=1)

    def crash(p, spec_path, rdir):
        with open(os.path.join(rdir, "rank-00000.log"), "w") as f:
            f.write("".join(f"line {i}\n" for i in range(30)) + "x" * 500 + "\n")
        return {0: {"exit_code": -11}}, None
    run = repeats.run_repeat(point, 0, launcher(crash))
    assert run["status"] == "failed"
    assert run["error"] == "rank 0 left no record: killed by SIGSEGV"
    assert run["log_tail"]["rank"] == 0
    lines = run["log_tail"]["lines"]
    assert len(lines) == 20 and lines[0] == "line 11" and lines[-1].endswith("...")
    assert len(lines[-1]) == 240
    assert run["exit_codes"] == [-11] and run["lost_ranks"] == [0]


def test_an_unsupported_point_runs_one_repeat_and_records_the_rest(tmp_path):
    point = make(tmp_path, repeats=3)
    calls = []
    got = repeats.run_point(point.dir, launcher(writer(calls, status="unsupported")), log=lambda m: None)
    assert got == ["unsupported"] * 3 and calls == [0]
    with open(os.path.join(point.repeat_dir(2), "run.json")) as f:
        run = json.load(f)
    assert run["not_run"] and "repeat 0 found it unsupported" in run["error"]


def test_set_aside_removes_an_attempt_that_never_started_and_keeps_one_that_did(tmp_path):
    # One rule for both launchers (the local one before a repeat, the Slurm driver when the
    # allocation ends under one): nothing or only the spec -> removed; else renamed aside.
    empty, spec_only, started = (str(tmp_path / f"repeat-0{i}") for i in range(3))
    os.makedirs(empty)
    os.makedirs(spec_only)
    open(os.path.join(spec_only, "spec.json"), "w").write("{}")
    os.makedirs(started)
    open(os.path.join(started, "spec.json"), "w").write("{}")
    open(os.path.join(started, "rank-00000.log"), "w").write("partial")
    for rdir in (empty, spec_only, started, str(tmp_path / "repeat-09")):
        repeats.set_aside(rdir)
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 1 and names[0].startswith("repeat-02.interrupted-")
    assert sorted(os.listdir(tmp_path / names[0])) == ["rank-00000.log", "spec.json"]


def test_a_rerun_repeat_starts_in_an_empty_folder(tmp_path):
    point = make(tmp_path, repeats=1)
    rdir = point.repeat_dir(0)
    os.makedirs(rdir)
    open(os.path.join(rdir, "spec.json"), "w").write("{}")  # a spec, then the allocation ended
    seen = []
    repeats.run_repeat(point, 0, launcher(lambda p, s, r: (seen.append(sorted(os.listdir(r))),
                                                           writer([])(p, s, r))[1]))
    assert seen == [["spec.json"]]
    assert not [d for d in os.listdir(point.dir) if ".interrupted-" in d]


def test_an_array_task_names_itself_by_array_and_task(monkeypatch):
    """Task 0's SLURM_JOB_ID equals its array's id, which squeue and scancel read as the whole
    array: the driver must name its own job A_T, or it stops its siblings' steps."""
    from launchers.backends.slurm import nodes as slurm_nodes
    monkeypatch.setenv("SLURM_JOB_ID", "1013")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    assert slurm_nodes.this_job() == "1013"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "1013")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    assert slurm_nodes.this_job() == "1013_0"


def test_a_cancelled_repeat_is_not_done_a_rerun_runs_it_again(tmp_path):
    """The rule (contract/statuses.py `final`): every recorded ending is a finding but
    `cancelled`, a repeat stopped from outside before it measured anything."""
    from contract import statuses
    assert not statuses.final({"status": "cancelled"})
    assert all(statuses.final({"status": s}) for s in statuses.STATUSES if s != "cancelled")
    point = make(tmp_path, repeats=2)
    calls = []
    repeats.run_repeat(point, 0, launcher(writer(calls, status="cancelled")))
    repeats.run_repeat(point, 1, launcher(writer(calls, status="timeout")))
    assert sweepdir.recorded(point) == 1  # the timeout is a finding; the cancelled repeat is not
    logged = []
    got = repeats.run_point(point.dir, launcher(writer(calls)), log=logged.append)
    assert got == ["ok", "timeout"] and calls == [0, 1, 0]
    assert logged[0].startswith("000-pytorch-resnet50-fp32-1x1-bs4 repeat 0: cancelled before (rank 0: x); "
                                "running it again")
    aside = [d for d in os.listdir(point.dir) if ".interrupted-" in d]
    assert len(aside) == 1 and aside[0].startswith("repeat-00")  # the cancelled one, kept whole
    assert json.load(open(os.path.join(point.dir, aside[0], "run.json")))["status"] == "cancelled"
