"""A local point's owner from outside (launchers/backends/local_owner.py, the local launcher's
`live` and `cancel`, `launch status` and `launch cancel` on them): real processes that write
their own local.json, alive, dead, a zombie, a pid that is another process's by now, another
host's; a real SIGINT to a process that stops as the launcher's Ctrl-C path does. The whole
path on a real sweep: tests/integration/test_local_cancel.py."""
import contextlib
import os
import subprocess
import sys
import textwrap

import pytest

from contract import paths, records
from launchers.backends import local_owner
from launchers.backends.local import LocalLauncher
from launchers.commands import cancel, status
from launchers.suite import ROOT
from tests import sweepfiles

# A stand-in for the local launcher: it writes the point's local.json as the launcher does,
# says so, and on SIGINT ends the point (local_owner.end) and exits 130, as stopping.owner does.
OWNER = textwrap.dedent("""
    import signal, sys, time
    from launchers.backends import local_owner
    def stop(signum, frame):
        local_owner.end(sys.argv[1])
        sys.exit(130)
    signal.signal(signal.SIGINT, stop)
    local_owner.begin(sys.argv[1])
    print("began", flush=True)
    time.sleep(60)
""")


@contextlib.contextmanager
def owning(folder):
    """The live process that owns the point in `folder` (killed at the end, whatever happens)."""
    proc = subprocess.Popen([sys.executable, "-c", OWNER, folder], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "began"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def owner(tmp_path):
    """A point's folder, one of its two repeats recorded, and the live process that owns it."""
    p = sweepfiles.write_point(tmp_path, "000-a", repeats=2)
    sweepfiles.write_repeat(p, 0, [1.0])
    with owning(p["dir"]) as proc:
        yield p, proc


def test_a_live_owner_runs_its_point_and_status_says_running(owner, tmp_path):
    p, proc = owner
    rec = local_owner.read(p["dir"])
    assert rec["pid"] == proc.pid and rec["ended_unix"] is None
    assert local_owner.alive(rec) is True and local_owner.running(rec) is True
    (row,) = status.states(str(tmp_path))
    assert (row["state"], row["job"], row["ok"], row["recorded"]) == ("RUNNING", f"pid {proc.pid}", 1, 1)


def test_a_dead_owner_leaves_its_point_incomplete_saying_why(owner, tmp_path):
    p, proc = owner
    proc.kill()
    proc.wait()
    assert local_owner.alive(local_owner.read(p["dir"])) is False
    (row,) = status.states(str(tmp_path))
    assert (row["state"], row["detail"]) == (
        "INCOMPLETE", f"1 repeat(s) not recorded; its local launcher (pid {proc.pid}) died before finishing it")


def test_a_zombie_has_ended(owner):
    p, proc = owner
    proc.kill()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)   # dead, not reaped: a zombie
    assert local_owner.created(proc.pid) is None
    assert local_owner.alive(local_owner.read(p["dir"])) is False


def test_a_pid_that_is_another_process_now_is_not_the_owner(owner):
    """The pid lives, but started at another time than the recorded owner (as after the pid's
    reuse), or on another boot: not the owner. Another host's: cannot tell."""
    p, proc = owner
    rec = local_owner.read(p["dir"])
    boot, ticks = rec["created"].split("/")
    assert local_owner.alive(dict(rec, created=f"{boot}/{int(ticks) - 1}")) is False
    assert local_owner.alive(dict(rec, created=f"another-boot/{ticks}")) is False
    assert local_owner.alive(dict(rec, host="not-" + rec["host"])) is None
    assert LocalLauncher().live([p["dir"]])[0][p["dir"]].state == "RUNNING"
    records.write_json_atomic(os.path.join(p["dir"], paths.LOCAL_FILE), dict(rec, host="elsewhere"))
    assert LocalLauncher().live([p["dir"]]) == ({}, None)   # the records and the heartbeat say


def test_an_ended_point_of_a_live_launcher_is_not_running(owner, tmp_path):
    p, proc = owner
    local_owner.end(p["dir"])
    rec = local_owner.read(p["dir"])
    assert local_owner.alive(rec) is True and local_owner.running(rec) is False
    assert status.states(str(tmp_path))[0]["state"] == "INCOMPLETE"


def test_cancel_sends_sigint_and_the_point_reads_cancelled(owner, tmp_path, capsys):
    p, proc = owner
    assert cancel.main([str(tmp_path)]) == 0
    assert proc.wait(timeout=5) == 130   # its SIGINT handler ran: Ctrl-C's path
    out = capsys.readouterr().out
    assert f"cancelled 1 local point(s) of {tmp_path}: SIGINT to its launcher (pid {proc.pid})" in out
    rec = local_owner.read(p["dir"])
    assert rec["cancelled_unix"] and rec["ended_unix"] >= rec["cancelled_unix"]   # end kept the mark
    (row,) = status.states(str(tmp_path))
    assert (row["state"], row["detail"]) == ("CANCELLED", "cancelled with 1 repeat(s) not recorded")
    # cancelled again, or a finished local sweep: one line, nothing to do, exit 0
    assert cancel.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"nothing to cancel: none of the 1 local point(s) of {tmp_path} is running")


def test_cancel_of_a_point_run_on_another_host_says_where(tmp_path, capsys):
    p = sweepfiles.write_point(tmp_path, "000-a", repeats=1)
    records.write_json_atomic(os.path.join(p["dir"], paths.LOCAL_FILE),
                              {"pid": 1, "created": "x/1", "host": "elsewhere", "ended_unix": None})
    assert cancel.main([str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "(run `launch cancel` on elsewhere)" in captured.out
    assert captured.err.strip() == f"error: points of {tmp_path} run on elsewhere: cancel them there"


def test_a_local_search_runs_while_its_launcher_lives(tmp_path):
    base = "000-pytorch-resnet50-fp32-1x1-bs4"
    ledger = {"schema": paths.SEARCH_SCHEMA, "point": base, "key": "batch_size", "done": False,
              "tries": [{"value": 8, "outcome": "ok"}], "largest_ok": None, "smallest_oom": None}
    os.makedirs(tmp_path / paths.SEARCHES_DIR)
    records.write_json_atomic(paths.search_ledger(tmp_path, base), ledger)
    os.makedirs(paths.point_dir(tmp_path, base))
    with owning(paths.point_dir(tmp_path, base)) as proc:
        (row,) = status.states(str(tmp_path))
        assert (row["state"], row["job"], row["detail"]) == (
            "RUNNING", f"pid {proc.pid}", "search batch_size: 1 tried, largest ok so far 8")
        proc.kill()
        proc.wait()
        (row,) = status.states(str(tmp_path))
        assert (row["state"], row["detail"]) == (
            "INCOMPLETE", f"search batch_size: 1 tried, largest ok so far 8; its local launcher "
                          f"(pid {proc.pid}) died before finishing it")
