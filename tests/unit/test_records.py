"""Run status rules and crash-safe writing of records."""
import json
import os

import pytest

from frameworks.common import records


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
    assert records.run_status(ranks, 2, ended_by)[0] == expected


def test_the_first_rank_to_end_badly_names_the_status():
    # rank 1 ran out of memory first; rank 0 then failed on the broken collective
    oom = dict(rec("oom", "OutOfMemoryError"), ended_unix=10.0)
    broken = dict(rec("failed", "gloo: connection closed"), ended_unix=12.0)
    assert records.run_status({0: broken, 1: oom}, 2) == ("oom", "rank 1: OutOfMemoryError")


def test_run_status_keeps_the_error_of_the_cause():
    status, error = records.run_status({0: rec("cancelled", "SIGTERM"), 1: rec("failed", "boom")}, 2)
    assert error == "rank 1: boom"
    assert records.run_status({0: rec("ok")}, 3)[1] == "no record from rank(s) 1, 2"


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
        records.read_spec(p)
    p.write_text(json.dumps({"schema": "other", "version": 1}))
    with pytest.raises(ValueError, match="not a dlbench.spec"):
        records.read_spec(p)
