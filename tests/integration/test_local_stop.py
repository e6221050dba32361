"""A local sweep stopped as users stop one (launchers/backends/stopping.py, docs/statuses.md):
Ctrl-C typed into the launcher's terminal, SIGTERM (`timeout`, a CI runner, systemd), the
terminal closed (SIGHUP), SIGKILL; real launchers (`python -m launch ... launcher=local`),
real ranks of a tiny ResNet-50 point with measure_steps far beyond the seconds it is given,
real signals. Each stop leaves no rank (nor anything a rank started, nor the forkserver that
forked the ranks: launchers/backends/forked.py) 30 s later, INT, TERM
and HUP record the repeat `cancelled` with the signal as its cause and exit 130, 143, 129,
and a rerun into the folder completes the point. The seconds from signal to last rank gone
are printed (`-s`) and kept in docs/statuses.md."""
import fcntl
import json
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import threading
import time

import pytest

from contract import heartbeat, paths
from launchers.backends import step
from launchers.suite import ROOT
from tests.frameworks_env import require_env

pytestmark = pytest.mark.e2e
# 2 ranks of a tiny ResNet-50: some 70 steps a second here; 400 steps are the rerun's 6 s
POINT = ["preset=smoke", "repeats=1", "gpus_per_node=2", "warmup_steps=2", "launcher=local"]
STEPS = 400
GONE_WITHIN_S = 30


def proc_stat(pid: int):
    """(state, session) of a live process, None when it is gone (a zombie is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[-1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    if len(fields) < 4 or fields[0] in ("Z", "X"):  # gone as it was read, or a zombie
        return None
    return fields[0], int(fields[3])


def rank_pids(sweep) -> set:
    """The worker processes of this test's sweep, by their command lines as `ps` shows them
    (their spec is in the sweep's folder): never anything of another sweep or test."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:  # a forked rank's title is one string
                argv = f.read().decode(errors="replace").replace("\0", " ").split()
        except OSError:
            continue
        if "--spec" in argv and any(a.startswith(str(sweep)) for a in argv):
            if proc_stat(int(name)):
                out.add(int(name))
    return out


def forkservers(launcher: int) -> set:
    """The launcher's forkservers (launchers/backends/forked.py), which its ranks' forks are."""
    out = set()
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                forkserver = b"frameworks.common.forkserver" in f.read()
            with open(f"/proc/{name}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[-1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if forkserver and parent == launcher:
            out.add(int(name))
    return out


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[-1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0.0


def left(sessions: set) -> set:
    """Live processes in the ranks' sessions: the ranks and whatever they started."""
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st and st[1] in sessions:
                found.add(int(name))
    return found


class Launch:
    """One `python -m launch` of the point into `sweep`; in a terminal of its own (a pty
    whose controlling process it is) where `tty`, as a user's shell would start it."""

    def __init__(self, sweep, *extra, tty=False, steps=STEPS):
        self.sweep, self.out, self.master, self.hanging_up = sweep, [], None, False
        self.started = time.time()
        argv = [sys.executable, "-m", "launch", *POINT, f"measure_steps={steps}", *extra,
                f"hydra.run.dir={sweep}"]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        if tty:
            self.master, slave = pty.openpty()
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=slave, stdout=slave,
                                         stderr=slave, start_new_session=True,
                                         preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
            os.close(slave)
            self.drain = threading.Thread(target=self._drain, daemon=True)
            self.drain.start()
        else:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT)
            threading.Thread(target=lambda: self.out.append(self.proc.stdout.read().decode()),
                             daemon=True).start()

    def _drain(self):
        # a read in flight would hold the terminal open past its close: look, then read
        while not self.hanging_up:
            if not select.select([self.master], [], [], 0.1)[0]:
                continue
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            self.out.append(data.decode(errors="replace"))

    def ranks_running(self, n: int, settle_s: float = 2.0, cpu_s: float = 0, stepping: bool = False) -> set:
        """The sessions of `n` running ranks, `settle_s` after they started and once each
        has had `cpu_s` seconds of CPU (a clock that a loaded machine does not run ahead of),
        and, where `stepping`, once rank 0's heartbeat of this launch counts a step."""
        deadline = time.monotonic() + 120
        while (len(rank_pids(self.sweep)) < n or min(map(cpu_seconds, rank_pids(self.sweep))) < cpu_s
               or (stepping and not self.stepping())):
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < deadline, "the ranks never started\n" + self.text()
            time.sleep(0.1)
        time.sleep(settle_s)
        pids = rank_pids(self.sweep)
        assert len(pids) == n and self.proc.poll() is None, self.text()
        return {proc_stat(p)[1] for p in pids}

    def stepping(self) -> bool:
        """Rank 0's heartbeat (written every BEAT_S) counts a step of this launch's repeat:
        the ranks are past their setup, whose rendezvous a stop can leave a rank waiting in
        on a peer already gone, until its watcher gives up (frameworks/common/sigterm.py)."""
        beats = [heartbeat.read(str(p)) for p in (self.sweep / paths.POINTS_DIR).glob("*")]
        return any(b and b["started_unix"] >= self.started and b["step"] >= 1 for b in beats)

    def stop(self, how, n: int = 2, settle_s: float = 2.0, cpu_s: float = 0, stepping: bool = False) -> dict:
        """Stop it `how` ("ctrl-c", "hangup", or a signal) once its ranks run -> what was seen."""
        sessions = self.ranks_running(n, settle_s, cpu_s, stepping)
        servers = forkservers(self.proc.pid)
        sessions |= {proc_stat(p)[1] for p in servers if proc_stat(p)}  # each leads its own
        sent = time.monotonic()
        if how == "ctrl-c":
            os.write(self.master, b"\x03")  # the terminal's SIGINT to its foreground group
        elif how == "ctrl-c twice":
            os.write(self.master, b"\x03")
            time.sleep(1.0)
            os.write(self.master, b"\x03")
        elif how == "hangup":
            self.hanging_up = True
            self.drain.join()
            os.close(self.master)  # the terminal goes: SIGHUP to its controlling process
        else:
            self.proc.send_signal(how)
        while left(sessions) and time.monotonic() - sent < GONE_WITHIN_S:
            time.sleep(0.05)
        gone_s = time.monotonic() - sent
        remaining = left(sessions)
        code = self.proc.wait(timeout=60)
        time.sleep(0.2)  # the drain's last words
        rdir = self.sweep / paths.POINTS_DIR
        (pdir,) = list(rdir.iterdir())
        run = pdir / paths.repeat_name(0) / paths.RUN_FILE
        ranks = sorted((pdir / paths.repeat_name(0)).glob("rank-*.json"))
        return {"gone_s": gone_s, "left": remaining, "code": code, "text": self.text(), "servers": servers,
                "run": json.loads(run.read_text()) if run.exists() else None,
                "ranks": [json.loads(r.read_text()) for r in ranks]}

    def text(self) -> str:
        return "".join(self.out)


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """One point, stopped four ways one after another (each launch reruns the repeat the
    last one cancelled) half a second into its steps, then run to its end."""
    sweep = tmp_path_factory.mktemp("stopped")
    seen = {"ctrl-c": Launch(sweep, tty=True).stop("ctrl-c", settle_s=0.5, stepping=True),
            "SIGTERM": Launch(sweep).stop(signal.SIGTERM, settle_s=0.5, stepping=True),
            "hangup": Launch(sweep, tty=True).stop("hangup", settle_s=0.5, stepping=True),
            "SIGKILL": Launch(sweep).stop(signal.SIGKILL, settle_s=0.5, stepping=True)}
    for how, s in seen.items():
        print(f"{how}: last rank gone {s['gone_s']:.2f} s after the signal; launcher exit {s['code']}")
    t0 = time.monotonic()
    rerun = subprocess.run([sys.executable, "-m", "launch", *POINT, f"measure_steps={STEPS}",
                            f"hydra.run.dir={sweep}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
    print(f"rerun: {time.monotonic() - t0:.1f} s")
    return sweep, seen, rerun


@pytest.mark.parametrize("how", ["ctrl-c", "SIGTERM", "hangup", "SIGKILL"])
def test_no_rank_outlives_the_stop(stopped, how):
    _, seen, _ = stopped
    assert seen[how]["servers"], "the PyTorch ranks on this CPU were not forked by a forkserver"
    assert not seen[how]["left"], f"{how}: processes {seen[how]['left']} outlived the launcher"
    assert seen[how]["gone_s"] < GONE_WITHIN_S


@pytest.mark.parametrize("how,name,code", [("ctrl-c", "SIGINT", 130), ("SIGTERM", "SIGTERM", 143),
                                           ("hangup", "SIGHUP", 129)])
def test_int_term_hup_record_cancelled_with_the_signal_and_exit_128_plus_it(stopped, how, name, code):
    _, seen, _ = stopped
    s = seen[how]
    assert s["code"] == code, s["text"]
    # the ranks ended of themselves at SIGTERM, well within the grace: no SIGKILL was needed
    assert s["gone_s"] < step.TERM_S
    run = s["run"]
    assert run["status"] == "cancelled" and run["stopped_by"] == name, run
    assert run["error"].startswith(f"repeat ended by {name} to the launcher; first: rank ")
    assert [r["status"] for r in s["ranks"]] == ["cancelled"] * 2
    assert all(r["error"] == "Cancelled: terminated by SIGTERM" for r in s["ranks"])
    if how != "hangup":  # a hung-up terminal reads nothing more
        assert f"got {name}: stopping the ranks" in s["text"]
        assert f"the launcher: stopped by {name}; what is recorded is kept" in s["text"]


def test_sigkill_leaves_the_repeat_unrecorded(stopped):
    _, seen, _ = stopped
    assert seen["SIGKILL"]["code"] == -signal.SIGKILL and seen["SIGKILL"]["run"] is None


def test_a_rerun_completes_the_point(stopped):
    sweep, seen, rerun = stopped
    # each launch ran the repeat the one before had cancelled (SIGKILL's left no run.json)
    for how, before in (("SIGTERM", "SIGINT"), ("hangup", "SIGTERM"), ("SIGKILL", "SIGHUP")):
        if how != "hangup":  # a hung-up terminal reads nothing more
            assert f"repeat 0: cancelled before (repeat ended by {before} to the launcher; " \
                   "first: rank " in seen[how]["text"]
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "repeat 0: ok" in rerun.stdout
    (pdir,) = list((sweep / paths.POINTS_DIR).iterdir())
    run = json.loads((pdir / paths.repeat_name(0) / paths.RUN_FILE).read_text())
    assert run["status"] == "ok" and "stopped_by" not in run
    # every stopped attempt kept whole beside it, none read as a repeat
    assert len(list(pdir.glob(f"{paths.repeat_name(0)}.interrupted-*"))) == 4
    status = subprocess.run([sys.executable, "-m", "launch", "status", str(sweep)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert "COMPLETED" in status.stdout, status.stdout


def deaf_python(tmp_path):
    """An 'interpreter' whose rank ignores SIGTERM, as one stuck where no signal reaches it."""
    script = tmp_path / "deaf-python"
    script.write_text("#!/bin/sh\ntrap '' TERM\nsleep 600\n")
    script.chmod(0o755)
    return script


def test_ranks_deaf_to_sigterm_get_sigkill_after_the_grace_or_at_the_second_ctrl_c(tmp_path):
    deaf = f"framework.python={deaf_python(tmp_path)}"
    once = Launch(tmp_path / "sweep", deaf, tty=True).stop("ctrl-c", settle_s=0.5)
    twice = Launch(tmp_path / "sweep", deaf, tty=True).stop("ctrl-c twice", settle_s=0.5)
    print(f"ranks deaf to SIGTERM: gone {once['gone_s']:.1f} s after Ctrl-C (SIGKILL after "
          f"step.TERM_S={step.TERM_S} s), {twice['gone_s']:.1f} s after a second Ctrl-C 1 s later")
    assert not once["left"] and not twice["left"]
    assert step.TERM_S <= once["gone_s"] < step.TERM_S + 3
    assert 1.0 <= twice["gone_s"] < 3
    assert once["code"] == twice["code"] == 130
    for s, why in ((once, "SIGINT to the launcher"),
                   (twice, "SIGINT to the launcher, twice: its ranks killed at once")):
        run = s["run"]
        assert run["status"] == "cancelled" and run["stopped_by"] == "SIGINT"
        assert run["error"] == f"repeat ended by {why}; first: no record from rank(s) 0, 1"
        assert run["exit_codes"] == [-signal.SIGKILL] * 2


def test_a_framework_that_takes_sigterm_for_itself_still_records_cancelled(tmp_path):
    """TensorFlow's MultiWorkerMirroredStrategy sets a C handler of its own for SIGTERM (its
    preemption notifier: it logs "SIGTERM caught" and nothing ends); the harness takes the
    signal back once the session is built (frameworks/common/sigterm.py `reclaim`)."""
    require_env("tensorflow")
    # signalled in its timed loop, well past the strategy's start (TensorFlow's import, the
    # strategy and the warm-up take some 5 s of a rank's CPU here; 20,000 steps take minutes)
    s = Launch(tmp_path / "sweep", "framework=tensorflow", steps=20000).stop(
        signal.SIGTERM, settle_s=0.5, cpu_s=10)
    print(f"tensorflow, 2 ranks: last rank gone {s['gone_s']:.2f} s after SIGTERM")
    assert s["code"] == 143 and not s["left"]
    assert s["gone_s"] < step.TERM_S  # of themselves, not by the SIGKILL after the grace
    assert [r["status"] for r in s["ranks"]] == ["cancelled"] * 2, s["run"]
    assert all(len(r["steps"]) == 2 for r in s["ranks"])  # past the warm-up: in the timed loop
    assert s["run"]["status"] == "cancelled" and s["run"]["stopped_by"] == "SIGTERM"


def test_a_killed_forkserver_takes_its_ranks_and_their_repeat_says_so(tmp_path):
    """The forkserver killed under running ranks (the out-of-memory killer's likely pick: it
    holds torch): the parent-death signal kills its ranks, the repeat records them killed
    and the launcher ends; nothing is left."""
    launch = Launch(tmp_path / "sweep", steps=20000)
    sessions = launch.ranks_running(2, settle_s=0.5, stepping=True)
    (server,) = forkservers(launch.proc.pid)
    os.kill(server, signal.SIGKILL)
    code = launch.proc.wait(timeout=120)
    deadline = time.monotonic() + GONE_WITHIN_S
    while left(sessions | {server}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left(sessions | {server})
    (pdir,) = list((tmp_path / "sweep" / paths.POINTS_DIR).iterdir())
    run = json.loads((pdir / paths.repeat_name(0) / paths.RUN_FILE).read_text())
    assert run["exit_codes"] == [-signal.SIGKILL] * 2, run
    assert run["status"] != "ok" and "killed by SIGKILL" in run["error"], run
    assert code != 0, launch.text()
    assert f"the forkserver (pid {server}) ended (killed by SIGKILL" in launch.text()
