"""`launch status` and `launch cancel` without a cluster: job-array ids as squeue and sacct
print them, a search's own line and its tries, a cancelled point Slurm has forgotten, and
the one-line refusals (launchers/backends/slurm/sacct.py, launchers/commands/status.py, launchers/commands/cancel.py). The
same commands against the real cluster: tests/integration/test_slurm_status_cancel.py."""
import os

import pytest

from contract import paths, records
from launchers.backends.slurm import sacct
from launchers.commands import cancel, status
from tests import sweepfiles


@pytest.mark.parametrize("field,ids", [
    ("123", ["123"]), ("123_4", ["123_4"]),
    ("123_[0-3]", ["123_0", "123_1", "123_2", "123_3"]),
    ("123_[2-4%2]", ["123_2", "123_3", "123_4"]),      # after % the throttle
    ("123_[1,5-6]", ["123_1", "123_5", "123_6"]),
    ("123_[1-7:3]", ["123_1", "123_4", "123_7"]),
])
def test_a_job_id_field_names_its_jobs(field, ids):
    assert sacct._ids_of(field) == ids


def test_a_tasks_own_line_wins_over_its_arrays_range():
    out = "9_0|COMPLETED\n9_[1-3%2]|PENDING\n9_2|RUNNING\n12|FAILED\n"
    rows = sacct._rows(out, {"9_0", "9_2", "9_3", "12", "13"})
    assert rows == {"9_0": "COMPLETED", "9_2": "RUNNING", "9_3": "PENDING", "12": "FAILED"}


def test_one_call_each_asks_for_arrays_by_their_array_id(monkeypatch):
    calls = []

    def run(argv, timeout):
        calls.append(argv)
        return "" if argv[0] == "squeue" else "5_[0-1]|CANCELLED by 0\n6|COMPLETED\n"
    monkeypatch.setattr(sacct, "_run", run)
    ids = ["5_0", "5_1", "6", "garbage; rm -rf /"]
    states = {job: info["state"] for job, info in sacct.jobs(ids).items()}
    assert states == {"5_0": "CANCELLED", "5_1": "CANCELLED", "6": "COMPLETED",
                      "garbage; rm -rf /": None}
    assert [c[0] for c in calls] == ["squeue", "sacct"]
    assert calls[0][calls[0].index("-j") + 1] == "5,6" and "-r" in calls[0]
    assert calls[1][calls[1].index("-j") + 1] == "5,6"


def slurm_point(sweep, name, job, repeats=2, recorded=0, **extra):
    p = sweepfiles.write_point(sweep, name, repeats=repeats)
    for r in range(recorded):
        sweepfiles.write_repeat(p, r, [1.0])
    records.write_json_atomic(os.path.join(p["dir"], paths.SLURM_FILE),
                              {"schema": paths.SLURM_SCHEMA, "job_id": job, "log": "L", **extra})
    return p


def test_a_cancelled_point_stays_cancelled_when_slurm_forgets_it(tmp_path):
    slurm_point(tmp_path, "000-a", "41", recorded=1, cancelled_unix=1.0)
    slurm_point(tmp_path, "001-b", "42", recorded=1)
    pts = {p["name"]: p for p in status.read_points(str(tmp_path))}
    live = sweepfiles.slurm_live
    assert status.point_state(pts["000-a"], live(pts["000-a"])) == ("CANCELLED", "cancelled with 1 repeat(s) not recorded")
    assert status.point_state(pts["001-b"], live(pts["001-b"]))[0] == "INCOMPLETE"
    assert status.point_state(pts["000-a"], live(pts["000-a"], "RUNNING"))[0] == "RUNNING"  # Slurm's word first


def test_a_cancelled_job_the_controller_still_lists_pending_is_cancelled(tmp_path, monkeypatch):
    """scancel returned; a loaded controller may list the job pending a moment longer (seen
    under a full make test): the point is CANCELLED, one not cancelled stays PENDING."""
    slurm_point(tmp_path, "000-a", "41", recorded=0, cancelled_unix=1.0)
    slurm_point(tmp_path, "001-b", "42", recorded=0)
    monkeypatch.setattr(sacct, "_run", lambda argv, timeout: "41|PENDING|JobHeldUser\n42|PENDING|JobHeldUser\n")
    rows = {r["point"]: r["state"] for r in status.states(str(tmp_path))}
    assert rows == {"000-a": "CANCELLED", "001-b": "PENDING"}


def search_sweep(tmp_path, done=False, job="77"):
    base = "000-pytorch-resnet50-fp32-1x1-bs4"
    ledger = {"schema": paths.SEARCH_SCHEMA, "point": base, "key": "batch_size", "done": done,
              "tries": [{"value": 8, "outcome": "ok"}, {"value": 16, "outcome": "oom"}],
              "largest_ok": 8 if done else None, "smallest_oom": 16 if done else None, "stopped": None}
    os.makedirs(tmp_path / paths.SEARCHES_DIR)
    records.write_json_atomic(paths.search_ledger(tmp_path, base), ledger)
    if job:
        os.makedirs(paths.point_dir(tmp_path, base))
        records.write_json_atomic(os.path.join(paths.point_dir(tmp_path, base), paths.SLURM_FILE),
                                  {"job_id": job, "log": "L"})
    for value, st in ((16, "oom"), (8, "ok")):
        p = slurm_point(tmp_path, f"{base}-batch_size={value}", job, repeats=1) if job else \
            sweepfiles.write_point(tmp_path, f"{base}-batch_size={value}", repeats=1)
        p["search"] = {"base": base, "value": value}
        records.write_json_atomic(os.path.join(p["dir"], paths.POINT_FILE), p)
        sweepfiles.write_repeat(p, 0, [1.0], status=st)
    return base


def test_a_search_has_its_own_line_and_its_recorded_tries_are_final(tmp_path, monkeypatch):
    base = search_sweep(tmp_path)
    monkeypatch.setattr(sacct, "jobs", lambda ids: {j: {"state": "RUNNING", "reason": None} for j in ids})
    rows = status.states(str(tmp_path))
    assert [(r["point"], r["state"], r["ok"], r["recorded"]) for r in rows] == [
        (base, "RUNNING", 1, 2),
        (f"{base}-batch_size=8", "COMPLETED", 1, 1),   # recorded: final, though the job runs on
        (f"{base}-batch_size=16", "OOM", 0, 1)]
    assert rows[0]["detail"] == "search batch_size: 2 tried, largest ok so far 8"


@pytest.mark.parametrize("done,slurm_state,state,detail", [
    (True, "COMPLETED", "COMPLETED", "largest batch_size that trains: 8, smallest out of memory: 16"),
    (False, "PENDING", "PENDING", "search batch_size: 2 tried, largest ok so far 8"),
    (False, "CANCELLED", "CANCELLED", "search batch_size: 2 tried, largest ok so far 8; "
                                      "the job ended cancelled before the search did"),
    (False, None, "INCOMPLETE", "search batch_size: 2 tried, largest ok so far 8; "
                                "Slurm no longer knows job 77"),
])
def test_search_state(tmp_path, done, slurm_state, state, detail):
    search_sweep(tmp_path, done=done)
    s = status.read_searches(str(tmp_path))[0]
    assert status.search_state(s, sweepfiles.slurm_live(s, slurm_state)) == (state, detail)


def test_wait_counts_the_search_not_its_oom_tries(tmp_path, capsys):
    search_sweep(tmp_path, done=True, job=None)   # a local search: no job at all
    assert status.main([str(tmp_path), "--wait", "--interval", "0"]) == 0
    assert "largest batch_size that trains: 8" in capsys.readouterr().out


def test_cancel_refuses_in_one_line(tmp_path, capsys):
    assert cancel.main([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    sweepfiles.write_point(tmp_path, "000-local", repeats=1)  # a local sweep: no job
    assert cancel.main([str(tmp_path)]) == 2
    assert "launcher=local" in capsys.readouterr().err
    slurm_point(tmp_path, "001-slurm", "5")
    assert cancel.main([str(tmp_path), "--point", "9*"]) == 2
    assert "no point matching '9*'" in capsys.readouterr().err
    assert status.main([str(tmp_path / "nowhere")]) == 2
    assert "is not a sweep" in capsys.readouterr().err


def test_status_says_when_slurm_knows_none_of_the_jobs(tmp_path, monkeypatch, capsys):
    slurm_point(tmp_path, "000-a", "41", recorded=1)
    monkeypatch.setattr(sacct, "jobs", lambda ids: {j: {"state": None, "reason": None} for j in ids})
    assert status.main([str(tmp_path)]) == 0
    assert "neither squeue nor sacct knows any of the sweep's 1 Slurm job(s)" in capsys.readouterr().err
    monkeypatch.setattr(sacct, "jobs", lambda ids: {j: {"state": "RUNNING", "reason": None} for j in ids})
    assert status.main([str(tmp_path)]) == 0
    assert "neither" not in capsys.readouterr().err


def preflight(p, outcome, excluded, error=None):
    records.write_json_atomic(os.path.join(p["dir"], paths.PREFLIGHT_FILE), {
        "schema": paths.PREFLIGHT_SCHEMA, "outcome": outcome, "error": error, "excluded": excluded})


def test_a_point_without_healthy_nodes_is_unhealthy_and_says_which_were_left_out(tmp_path):
    """preflight=true (launchers/driver/preflight.py): the left-out nodes and why, on every line; a
    point that found too few healthy nodes is UNHEALTHY, not a failed training run."""
    gone = slurm_point(tmp_path, "000-a", "41")
    preflight(gone, "unhealthy", {"node1": ["devices: 1 GPU(s), 2 requested"]},
              error="needs 3 healthy node(s); partition debug has 2 once node1: ... are left out")
    ran = slurm_point(tmp_path, "001-b", "43", recorded=2)
    preflight(ran, "ok", {"node3": ["links: sends slowly: node3 -> node1 0.01 GB/s"]})
    moved = slurm_point(tmp_path, "002-c", "45")
    preflight(moved, "resubmitted", {"node3": ["links: sends slowly"]})
    pts = {p["name"]: p for p in status.read_points(str(tmp_path))}
    live = sweepfiles.slurm_live
    assert status.point_state(pts["000-a"], live(pts["000-a"], "COMPLETED")) == (
        "UNHEALTHY", "needs 3 healthy node(s); partition debug has 2 once node1: ... are left out")
    assert status.point_state(pts["001-b"], live(pts["001-b"], "COMPLETED")) == (
        "COMPLETED", "preflight left out node3 (links: sends slowly: node3 -> node1 0.01 GB/s)")
    assert status.point_state(pts["002-c"], live(pts["002-c"], "PENDING", "Priority")) == (
        "PENDING", "waiting: Priority; preflight left out node3 (links: sends slowly)")
    assert "UNHEALTHY" in status.FINAL


def test_the_point_status_rule_names_unhealthy_only_without_repeats():
    from contract import statuses
    assert statuses.point_status([], 3, preflight="unhealthy") == "unhealthy"
    assert statuses.point_status(["ok"], 3, preflight="unhealthy") == "partial"
    assert statuses.point_status([], 3, preflight="ok") == "missing"
