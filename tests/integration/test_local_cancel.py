"""`launch cancel` on a running local sweep (launchers/backends/local.py `cancel`,
docs/statuses.md): a real launcher (`python -m launch ... launcher=local`, in the background)
with real ranks of a tiny ResNet-50 point far longer than the test; `launch status` says
RUNNING with its heartbeat's detail, `launch cancel` sends the launcher SIGINT as Ctrl-C does,
and then no rank (nor anything a rank started) is left, the launcher exited 130, the point
reads CANCELLED, and each command exits by the one table. Whatever happens, the test kills
what it started."""
import os
import signal
import subprocess
import sys
import time

import pytest

from contract import exits, paths, records
from launchers.commands import status
from launchers.suite import ROOT
from tests.integration.test_local_stop import left, proc_stat, rank_pids

pytestmark = pytest.mark.e2e
# test_local_stop.py's point (its cheapest two ranks), two repeats of steps it never reaches
POINT = ["preset=smoke", "repeats=2", "gpus_per_node=2", "warmup_steps=2", "launcher=local",
         "measure_steps=100000"]
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def launch(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "launch", *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def test_cancel_stops_a_running_local_sweep_and_its_ranks(tmp_path):
    sweep = tmp_path / "sweep"
    log = open(tmp_path / "launcher.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "launch", *POINT, f"hydra.run.dir={sweep}"],
                            cwd=ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    said = lambda: (tmp_path / "launcher.log").read_text()  # noqa: E731
    try:
        deadline, row = time.monotonic() + 90, None
        while not (row and row["state"] == "RUNNING" and row["detail"].startswith("running: repeat 1/2, step")):
            assert proc.poll() is None and time.monotonic() < deadline, said()
            time.sleep(0.2)
            rows = status.states(str(sweep)) if (sweep / paths.POINTS_DIR).is_dir() else []
            row = rows[0] if rows else None
        assert row["job"] == f"pid {proc.pid}"
        sessions = {proc_stat(p)[1] for p in rank_pids(sweep)}
        assert len(sessions) == 2, said()

        cancelled = launch("cancel", str(sweep))
        assert cancelled.returncode == exits.OK, cancelled.stdout + cancelled.stderr
        assert f"cancelled 1 local point(s) of {sweep}: SIGINT to its launcher (pid {proc.pid})" in cancelled.stdout
        assert proc.wait(timeout=5) == 130, said()   # as after Ctrl-C
        assert not left(sessions) and not rank_pids(sweep)   # nothing outlives its owner

        (pdir,) = (sweep / paths.POINTS_DIR).iterdir()
        run = records.read_json(str(pdir / paths.repeat_name(0) / paths.RUN_FILE))
        assert run["status"] == "cancelled" and "SIGINT to the launcher" in run["error"]
        shown = launch("status", str(sweep))
        assert shown.returncode == exits.OK
        line = shown.stdout.splitlines()[1]   # the table: its head, then the one point
        assert line.split()[:3] == [pdir.name, "CANCELLED", "0/1/2"] and f"pid {proc.pid}" in line, shown.stdout
        assert launch("status", str(sweep), "--wait").returncode == exits.FAILED   # final, not passed

        again = launch("cancel", str(sweep))
        assert (again.returncode, again.stdout.strip()) == (
            exits.OK, f"nothing to cancel: none of the 1 local point(s) of {sweep} is running")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)   # its ranks follow (their parent-death signal)
        proc.wait()
        for pid in rank_pids(sweep):
            os.kill(pid, signal.SIGKILL)
        log.close()
