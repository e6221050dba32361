"""A launcher's stop (launchers/backends/stopping.py) through the one step runner
(launchers/backends/step.py), with real processes and real signals to this process: the
first signal stops the step by the rule (SIGTERM, the grace, SIGKILL), a second kills at
once, the owner exits 128 + the signal's number; a rank dies with its owner's SIGKILL."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from contract import owner
from launchers.backends import local, step, stopping
from tests.unit.test_local_launcher import alive


def ranks(*argv_each):
    """Processes started as the local launcher starts ranks: own sessions, dying with us."""
    return local.Processes([subprocess.Popen(argv, start_new_session=True,
                                             preexec_fn=owner.die_with_owner())
                            for argv in argv_each])


def signal_me(*when_and_what):
    """Send this process each (seconds, signal) from a timer, as a user or a supervisor would."""
    for seconds, sig in when_and_what:
        threading.Timer(seconds, os.kill, (os.getpid(), sig)).start()


def test_a_stop_signal_stops_the_step_and_the_owner_exits_143():
    procs = ranks(["sleep", "60"], ["sleep", "60"])
    logged = []
    with pytest.raises(SystemExit) as ended:
        with stopping.owner(logged.append):
            signal_me((0.3, signal.SIGTERM))
            t0 = time.monotonic()
            out = step.run(procs, 60, 5, "repeat 0", logged.append)
            took = time.monotonic() - t0
            assert out.stop == out.ended_by == "cancelled" and out.stopped == {0, 1}
            assert took < 2  # sleep ends at SIGTERM: no wait for the grace
            assert stopping.cause() == "SIGTERM to the launcher"
            stopping.check()
    assert ended.value.code == 143
    assert logged[:2] == ["got SIGTERM: stopping the ranks (SIGTERM, then SIGKILL); again to kill "
                          "them at once", "repeat 0: SIGTERM to the launcher; stopping it"]
    assert [p.returncode for p in procs.procs] == [-signal.SIGTERM] * 2
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are put back


def test_ranks_that_ignore_sigterm_are_killed_at_the_second_ctrl_c():
    """A rank that does not end at SIGTERM would get SIGKILL after step.TERM_S; a second
    Ctrl-C does not wait for it."""
    procs = ranks(["sh", "-c", "trap '' TERM; sleep 60"])
    with pytest.raises(SystemExit) as ended:
        with stopping.owner(lambda m: None):
            signal_me((0.3, signal.SIGINT), (1.5, signal.SIGINT))
            t0 = time.monotonic()
            out = step.run(procs, 60, 5, "repeat 0", lambda m: None)
            took = time.monotonic() - t0
            assert 1.2 < took < 3 < step.TERM_S
            assert out.stop == "cancelled" and out.stopped == {0}
            assert stopping.cause() == "SIGINT to the launcher, twice: its ranks killed at once"
            stopping.check()
    assert ended.value.code == 130
    assert procs.procs[0].returncode == -signal.SIGKILL


def test_without_a_step_a_second_signal_stops_the_owner_where_it_is():
    with pytest.raises(SystemExit) as ended:
        with stopping.owner(lambda m: None):
            os.kill(os.getpid(), signal.SIGHUP)
            assert stopping.received() == "SIGHUP"
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(5)  # the second signal ends this at once
    assert ended.value.code == 129


OWNER = textwrap.dedent("""
    import subprocess, sys, time
    from contract import owner
    rank = subprocess.Popen(["sleep", "300"], start_new_session=True,
                            preexec_fn=owner.die_with_owner())
    print(rank.pid, flush=True)
    time.sleep(300)
""")


def test_a_rank_dies_with_its_owner_killed_outright():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True,
                             cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    rank = int(owner.stdout.readline())
    assert alive(rank) and os.getsid(rank) == rank != os.getsid(owner.pid)  # a session of its own
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + 5
    while alive(rank) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(rank), "the rank outlived its owner's SIGKILL"
