"""Run status rules (contract/statuses.py) and crash-safe writing of records."""
import json
import os

import pytest

from contract import spec as specs
from contract import records, statuses


def rec(status, error=None):
    return {"status": status, "error": error}


@pytest.mark.parametrize("ranks,ended_by,expected", [
    ({0: rec("ok"), 1: rec("ok")}, None, "ok"),
    ({0: rec("ok"), 1: rec("failed", "boom")}, None, "failed"),
    ({0: rec("cancelled", "SIGTERM"), 1: rec("failed", "boom")}, None, "failed"),
    ({0: rec("oom", "oom"), 1: rec("cancelled", "SIGTERM")}, None, "oom"),
    ({0: rec("ok"), 1: None}, None, "failed"),
    ({0: rec("cancelled"), 1: rec("cancelled")}, "timeout", "timeout"),
])
def test_run_status(ranks, ended_by, expected):
    assert statuses.run_status(ranks, 2, ended_by)[0] == expected


def test_the_first_rank_to_end_badly_names_the_status():
    # rank 1 ran out of memory first; rank 0 then failed on the broken collective
    oom = dict(rec("oom", "OutOfMemoryError"), ended_unix=10.0)
    broken = dict(rec("failed", "gloo: connection closed"), ended_unix=12.0)
    assert statuses.run_status({0: broken, 1: oom}, 2) == ("oom", "rank 1: OutOfMemoryError")


def test_run_status_keeps_the_error_of_the_cause():
    status, error = statuses.run_status({0: rec("cancelled", "SIGTERM"), 1: rec("failed", "boom")}, 2)
    assert error == "rank 1: boom"
    assert statuses.run_status({0: rec("ok")}, 3)[1] == "no record from rank(s) 1, 2"


def test_atomic_write_leaves_old_file_or_new(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    records.write_json_atomic(path, {"a": 1})

    def crash(obj, f, **kw):
        f.write('{"a": 2, "trunc')
        raise KeyboardInterrupt("killed mid-write")
    monkeypatch.setattr(json, "dump", crash)
    with pytest.raises(KeyboardInterrupt):
        records.write_json_atomic(path, {"a": 2})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["run.json"]  # no temporary file left behind


def test_read_spec_checks_schema_and_keys(tmp_path):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps({"schema": "dlbench.spec", "version": 1, "point": "x"}))
    with pytest.raises(ValueError, match="spec lacks repeat"):
        specs.read(p)
    p.write_text(json.dumps({"schema": "other", "version": 1}))
    with pytest.raises(ValueError, match="not a dlbench.spec"):
        specs.read(p)


def test_a_crash_without_a_record_is_the_cause_before_its_peers_errors():
    # rank 1 segfaulted; rank 0 then failed on the closed connection, and rank 2 was stopped
    broken = dict(rec("failed", "gloo: connection closed"), ended_unix=12.0)
    ends = {0: {"exit_code": 1}, 1: {"exit_code": -11, "node": "node2"},
            2: {"exit_code": -9, "stopped": True, "node": "node3"}}
    status, error = statuses.run_status({0: broken, 1: None, 2: None}, 3, rank_ends=ends)
    assert status == "failed"
    assert error == "rank 1 (node2) left no record: killed by SIGSEGV; no record from rank(s) 2 (on node3)"


def test_a_lost_node_names_its_ranks_and_keeps_the_first_error():
    survivor = dict(rec("failed", "Connection closed by peer [10.0.0.3]"), ended_unix=5.0)
    ends = {r: {"exit_code": None, "node": "node3"} for r in (4, 5, 6, 7)}
    out = statuses.run_outcome({0: survivor, 1: dict(survivor, ended_unix=6.0), 2: None, 3: None,
                                4: None, 5: None, 6: None, 7: None}, 8, rank_ends=ends)
    assert out["status"] == "failed" and out["cause"] == 0 and out["lost"] == [2, 3, 4, 5, 6, 7]
    assert out["error"] == ("rank 0: Connection closed by peer [10.0.0.3]; "
                            "no record from rank(s) 2-7 (on node3)")


def test_a_timeout_keeps_the_ranks_first_cause():
    status, error = statuses.run_status({0: rec("failed", "boom")}, 1, ended_by="timeout")
    assert (status, error) == ("timeout", "repeat ended by timeout; first: rank 0: boom")


@pytest.mark.parametrize("code,words", [
    (-11, "killed by SIGSEGV"), (-6, "killed by SIGABRT"), (134, "killed by SIGABRT"),
    (-9, "killed by SIGKILL (the kernel's out-of-memory killer is a likely cause)"),
    (3, "exit code 3"), (None, "no exit status known (its node may be lost)")])
def test_how_a_process_ended_in_words(code, words):
    assert statuses.describe_end({"exit_code": code}) == words


@pytest.mark.parametrize("runs,repeats,expected", [
    (["ok", "ok"], 2, "ok"), (["ok", "failed"], 2, "partial"), (["unsupported"] * 2, 2, "unsupported"),
    (["cancelled", "oom"], 2, "oom"), (["unsupported", "failed"], 2, "failed"),
    (["incomplete"], 2, "incomplete"), ([], 2, "missing"), (["corrupt", "incomplete"], 2, "corrupt")])
def test_point_status(runs, repeats, expected):
    assert statuses.point_status(runs, repeats) == expected


def test_update_json_sets_fields_and_keeps_the_rest_or_writes_nothing(tmp_path):
    path = str(tmp_path / "r.json")
    assert records.update_json(path, a=1) is False and not os.path.exists(path)   # missing
    records.write_json_atomic(path, [1, 2])
    assert records.update_json(path, a=1) is False and records.read_json(path) == [1, 2]   # not an object
    records.write_json_atomic(path, {"a": 0, "b": 2})
    assert records.update_json(path, a=1, c=3) is True
    assert records.read_json(path) == {"a": 1, "b": 2, "c": 3}
