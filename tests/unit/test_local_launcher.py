"""The local launcher's process rules, with real processes (launchers/backends/local.py)."""
import os
import subprocess
import time

from launchers.backends import local, step


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def rank_leaving_a_child(tmp_path, exit_code: int):
    """A 'rank' that starts a long sleep in the background (as a loader's worker process),
    writes its pid down and leaves at once."""
    pidfile = tmp_path / f"child-{exit_code}.pid"
    proc = subprocess.Popen(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; exit {exit_code}"],
                            start_new_session=True)
    return proc, pidfile


def child_pid(pidfile) -> int:
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline, "the rank never started its child"
        time.sleep(0.05)
    return int(pidfile.read_text())


def wait_ranks(procs, timeout_s):
    """The ranks run to their end by the step runner -> (rank_ends, ended_by)."""
    ranks = local.Processes(procs)
    outcome = step.run(ranks, timeout_s, local.LocalLauncher.FAILURE_GRACE_S, "ranks", print)
    return ranks.rank_ends(outcome.stopped), outcome.ended_by


def test_what_an_ended_rank_left_behind_is_killed(tmp_path):
    ranks = [rank_leaving_a_child(tmp_path, code) for code in (0, 3)]
    ends, ended_by = wait_ranks([proc for proc, _ in ranks], timeout_s=30)
    assert ended_by is None and ends[0]["exit_code"] == 0 and ends[1]["exit_code"] == 3
    for _, pidfile in ranks:
        pid = child_pid(pidfile)
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), f"pid {pid} outlived its rank"


def test_a_process_outside_the_ranks_groups_is_left_alone(tmp_path):
    bystander = subprocess.Popen(["sleep", "30"])
    try:
        proc, pidfile = rank_leaving_a_child(tmp_path, 0)
        wait_ranks([proc], timeout_s=30)
        assert bystander.poll() is None and os.getpgid(bystander.pid) != proc.pid
    finally:
        bystander.kill()
        bystander.wait()
