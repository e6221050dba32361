"""srun's own lines about a step's tasks (launchers/backends/slurm/srun_output.py), as srun 22.05 prints
them on the local test cluster; what the Slurm driver makes of them and of the rank records
while a step runs; and the pending reason the status command shows."""
import signal

import pytest

from launchers.backends.slurm import sacct, srun_output
from launchers.commands import status
from tests import sweepfiles


@pytest.mark.parametrize("line,rank,end", [
    ("srun: error: node2: task 1: Segmentation fault (core dumped)", 1,
     {"exit_code": None, "signal": "SIGSEGV", "node": "node2"}),
    ("srun: error: node1: task 1: Segmentation fault", 1,
     {"exit_code": None, "signal": "SIGSEGV", "node": "node1"}),
    ("srun: error: node3: tasks 2-3: Killed", 3,
     {"exit_code": None, "signal": "SIGKILL", "node": "node3"}),
    ("srun: error: node1: task 0: Exited with exit code 3", 0,
     {"exit_code": 3, "signal": None, "node": "node1"}),
    ("srun: error: node2: task 2: Aborted (core dumped)", 2,
     {"exit_code": None, "signal": "SIGABRT", "node": "node2"}),
    ("srun: error: node2: tasks 2-3: Terminated", 2,
     {"exit_code": None, "signal": "SIGTERM", "node": "node2"}),
    ("srun: error: gpu-a17: task 5: Bus error", 5,
     {"exit_code": None, "signal": "SIGBUS", "node": "gpu-a17"}),
])
def test_one_line_names_the_task_its_node_and_how_it_ended(line, rank, end):
    assert srun_output.task_ends(line)[rank] == end


def test_task_lists_and_many_lines():
    text = "\n".join([
        "srun: error: node1: tasks 0,2-3: Exited with exit code 3",
        "srun: error: node1: task 1: Segmentation fault (core dumped)",
        "srun: launch/slurm: _step_signal: Terminating StepId=5.0",
        "slurmstepd-node1: error: *** STEP 5.0 ON node1 CANCELLED AT 2026-11-23T10:35:05 ***",
        "srun: error: node2: tasks 4-5: Terminated",
        "srun: error: node2: task 4: Killed",   # a later report of the same task: the first stands
        "srun: Force Terminated StepId=5.0",
    ])
    ends = srun_output.task_ends(text)
    assert sorted(ends) == [0, 1, 2, 3, 4, 5]
    assert [ends[r]["exit_code"] for r in (0, 2, 3)] == [3, 3, 3]
    assert ends[1]["signal"] == "SIGSEGV" and ends[4]["signal"] == "SIGTERM"


def test_other_lines_say_nothing_about_tasks():
    text = ("srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
            "srun: error: Timed out waiting for job step to complete\n"
            "srun: error: Unable to allocate resources: Requested node configuration is not available\n"
            "srun: error: Task launch for StepId=9.1 failed on node node3: "
            "Communication connection failure\n")
    assert srun_output.task_ends(text) == {}


def test_node_failure_lines():
    text = ("srun: error: Node failure on node3\nsrun: error: Node failure on node3\n"
            "srun: error: node1: task 0: Exited with exit code 143\n")
    assert srun_output.failed_nodes(text) == ["node3"]
    assert srun_output.task_ends(text)[0]["exit_code"] == 143


@pytest.mark.parametrize("text,ranks", [("0", [0]), ("2-3", [2, 3]), ("0,2-3", [0, 2, 3]),
                                        ("1,4,7-9", [1, 4, 7, 8, 9])])
def test_task_ids(text, ranks):
    assert srun_output.task_ids(text) == ranks


def test_every_signal_description_maps_back_to_its_name():
    for sig in (signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE,
                signal.SIGILL, signal.SIGTERM, signal.SIGUSR1):
        assert srun_output.describe(signal.strsignal(sig))["signal"] == sig.name
    # a description this libc does not know is kept as said, not dropped
    assert srun_output.describe("Something odd")["signal"] == "Something odd"


@pytest.mark.parametrize("end,bad", [
    ({"exit_code": 3, "signal": None}, True), ({"exit_code": None, "signal": "SIGSEGV"}, True),
    ({"exit_code": None, "signal": "SIGKILL"}, True), ({"exit_code": 0, "signal": None}, False),
    # SIGTERM comes from outside (a cancel, a preemption, the driver's stop): not a failure
    ({"exit_code": None, "signal": "SIGTERM"}, False), ({"exit_code": 143, "signal": None}, False),
])
def test_what_counts_as_ending_badly(end, bad):
    assert srun_output.ended_badly(end) is bad


# ---- the pending reason in `launch status` (launchers/commands/status.py, backends/slurm/sacct.py)
def pending_point(runs=()):
    return {"name": "p", "expected": 2, "running": [], "slurm": {"job_id": "5", "log": "L"},
            "runs": {r: {"repeat": r, "status": s, "error": None if s == "ok" else f"{s}!"}
                     for r, s in enumerate(runs)}}


@pytest.mark.parametrize("runs,reason,detail", [
    ([], "ReqNodeNotAvail, UnavailableNodes:node3", "waiting: ReqNodeNotAvail, UnavailableNodes:node3"),
    (["failed"], "BeginTime", "waiting: BeginTime; repeat 0: failed!"),
    ([], None, ""),
])
def test_a_pending_point_says_why_it_waits(runs, reason, detail):
    p = pending_point(runs)
    assert status.point_state(p, sweepfiles.slurm_live(p, "PENDING", reason)) == ("PENDING", detail)
    # a running point has no reason to show
    assert "waiting" not in status.point_state(p, sweepfiles.slurm_live(p, "RUNNING", reason))[1]


def test_squeue_reason_is_read_in_the_same_call(monkeypatch):
    calls = []

    def fake_run(argv, timeout):
        calls.append(argv)
        return "7|PENDING|ReqNodeNotAvail, UnavailableNodes:node3\n8|RUNNING|None\n"
    monkeypatch.setattr(sacct, "_run", fake_run)
    jobs = sacct.jobs(["7", "8"])
    assert jobs == {"7": {"state": "PENDING", "reason": "ReqNodeNotAvail, UnavailableNodes:node3"},
                    "8": {"state": "RUNNING", "reason": None}}
    assert len(calls) == 1 and calls[0][-1] == "%i|%T|%r"
    assert sacct.jobs(["7"])["7"]["state"] == "PENDING"


# ---- what the driver reads while a step runs (launchers/backends/slurm/step_watch.py) -------------
def test_the_step_watch_reads_records_and_whole_srun_lines(tmp_path):
    from launchers.backends.slurm.step_watch import StepWatch
    (tmp_path / "rank-00000.json").write_text('{"status": "ok"}')
    (tmp_path / "srun.log").write_text("srun: error: node2: task 1: Segmentation fault (core dumped)\n"
                                       "srun: error: node3: task 2: Exi")  # a line half written
    watch = StepWatch(str(tmp_path), 3)
    watch.poll()
    assert watch.records == {0: "ok"} and watch.unended() == {2}
    assert watch.first_bad() == "rank 1 on node2: SIGSEGV"
    with open(tmp_path / "srun.log", "a") as f:
        f.write("ted with exit code 3\n")
    watch.poll()
    assert watch.ends()[2] == {"exit_code": 3, "signal": None, "node": "node3"} and not watch.unended()


@pytest.mark.parametrize("record,srun_line,bad", [
    ('{"status": "failed"}', "", "rank 0 ended failed"),
    ('{"status": "oom"}', "", "rank 0 ended oom"),
    # a rank stopped from outside (cancel, preemption, time limit) is not a failure
    ('{"status": "cancelled"}', "srun: error: node1: task 0: Exited with exit code 1\n", None),
    (None, "srun: error: node1: task 0: Terminated\n", None),
    (None, "srun: error: node1: task 0: Killed\n", "rank 0 on node1: SIGKILL"),
])
def test_what_starts_the_failure_grace(tmp_path, record, srun_line, bad):
    from launchers.backends.slurm.step_watch import StepWatch
    if record:
        (tmp_path / "rank-00000.json").write_text(record)
    (tmp_path / "srun.log").write_text(srun_line)
    watch = StepWatch(str(tmp_path), 2)
    watch.poll()
    assert watch.first_bad() == bad


def test_rank_ends_place_ranks_on_nodes_and_leave_the_unknown_unknown(tmp_path):
    from launchers.backends.slurm.step_watch import StepWatch
    hosts = ["node1", "node2", "node3"]
    for rank in (0, 1, 2, 3):
        (tmp_path / f"rank-{rank:05d}.json").write_text('{"status": "failed"}')
    (tmp_path / "srun.log").write_text("srun: error: node1: tasks 0-1: Exited with exit code 1\n"
                                       "srun: error: node2: task 3: Aborted (core dumped)\n")
    watch = StepWatch(str(tmp_path), 6)
    watch.poll()
    ends = watch.rank_ends(hosts, 2, None, stopped={4, 5})  # srun left waiting
    assert [ends[r]["node"] for r in range(6)] == ["node1", "node1", "node2", "node2", "node3", "node3"]
    assert ends[0] == {"exit_code": 1, "signal": None, "node": "node1", "stopped": False}
    assert ends[2]["exit_code"] == 0           # recorded, not reported: it exited 0
    assert ends[3]["signal"] == "SIGABRT"
    assert ends[5] == {"exit_code": None, "signal": None, "node": "node3", "stopped": True}
    assert watch.rank_ends(hosts, 2, 0, set())[5]["exit_code"] == 0  # srun succeeded
