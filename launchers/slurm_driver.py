"""The driver inside a point's allocation: runs once, on the first node, in the suite's Python.

submitit runs `PointDriver(point_dir)()` as the batch shell itself (launchers/slurm.py
`exec`s the interpreter). It calls launchers.driver.run_point with `start`, which runs
one repeat as one `srun` job step: one task per GPU on every node, MASTER_ADDR the first
host of the allocation, MASTER_PORT from the job id, the cluster's `env:` added.

How a repeat ends, and what it leaves:
- its ranks end: run.json from their records (launchers/driver.py);
- it passes timeout_s: the step is cancelled (ranks get SIGTERM), run.json says `timeout`;
  srun's own --time backstop ending it says the same;
- the allocation ends under it (scancel, preemption, `scontrol requeue`, the requeue
  signal before the time limit): NO run.json. The attempt is moved aside whole
  (repeat-NN.interrupted-T, never read by the analysis) and the driver exits; a requeued
  allocation runs the driver again, which skips every recorded repeat and reruns this one.
"""
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

from submitit.helpers import Checkpointable, DelayedSubmission

from frameworks.common import records
from launchers import driver, points, slurm

STEP_GRACE_S = 30  # how long a timed-out step's ranks get between SIGTERM and SIGKILL


class AllocationEnding(BaseException):
    """The allocation is going away under a repeat: it must not be recorded."""


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} driver: {message}", flush=True)


def first_host(nodelist: str) -> str:
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    return out[0]


def job_running(job_id: str) -> bool:
    """Whether the controller still has this job RUNNING (it marks a cancelled, preempted
    or requeued job before it signals the job's processes). True when it cannot tell."""
    try:
        r = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return True
    state = r.stdout.strip()
    return r.returncode != 0 or not state or state == "RUNNING"


def set_aside(rdir: str) -> None:
    """Move an interrupted attempt out of the analysis' way, whole; a repeat that never
    started (only its spec) is simply removed."""
    if not os.path.isdir(rdir):
        return
    if sorted(os.listdir(rdir)) in ([], ["spec.json"]):
        shutil.rmtree(rdir, ignore_errors=True)
    else:
        os.rename(rdir, f"{rdir}.interrupted-{time.time():.0f}")


class PointDriver(Checkpointable):
    """submitit's callable for one point. Checkpointable: on the requeue signal before the
    time limit, submitit calls checkpoint() and requeues the job, which reruns it."""

    def __init__(self, point_dir: str):
        self.point_dir = point_dir

    def checkpoint(self, *args, **kwargs) -> DelayedSubmission:
        log("the allocation nears its time limit: requeueing; recorded repeats are kept")
        return DelayedSubmission(PointDriver(self.point_dir))

    def __getstate__(self):
        return {"point_dir": self.point_dir}  # no run-time state travels with a requeue

    # ---- in the allocation ----------------------------------------------------------------
    def __call__(self):
        self.ending = None
        signal.signal(signal.SIGTERM, self._on_sigterm)  # cancel, preemption, requeue
        self.job_id = os.environ["SLURM_JOB_ID"]
        self.restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        self.nodelist = os.environ["SLURM_JOB_NODELIST"]
        self.master = first_host(self.nodelist)
        log(f"job {self.job_id} (start {self.restarts + 1}) on {os.uname().nodename}: "
            f"nodes {self.nodelist}, MASTER_ADDR={self.master}")
        try:
            statuses = driver.run_point(self.point_dir, self.start, log=log)
        except AllocationEnding as exc:
            raise SystemExit(f"driver: the allocation is ending ({exc}); unrecorded repeats "
                             "rerun when the job is requeued or the sweep resubmitted")
        bad = [f"repeat {r}: {s}" for r, s in enumerate(statuses) if s != "ok"]
        if bad:  # the job's own state then says the point did not complete ok
            raise RuntimeError(f"{len(bad)} of {len(statuses)} repeat(s) not ok ({', '.join(bad)}); "
                               "see run.json in the repeat folders")
        return statuses

    def _on_sigterm(self, signum, frame):
        self.ending = "SIGTERM"
        log("got SIGTERM: the allocation is ending")

    def start(self, point: dict, spec_path: str, rdir: str):
        """Run one repeat as one srun step -> (exit codes, ended_by)."""
        if self.ending:
            set_aside(rdir)
            raise AllocationEnding(self.ending)
        repeat = records.read_spec(spec_path)["repeat"]
        job_min = slurm.time_limit_min(point)
        argv = slurm.srun_argv(point, spec_path, rdir, sys.executable, job_min)
        port = slurm.master_port(self.job_id, repeat, self.restarts)
        env = slurm.step_env(point, self.master, port)
        records.write_json_atomic(os.path.join(rdir, "step.json"), {
            "argv": argv, "env": slurm.step_env_additions(point, self.master, port),
            "job_id": self.job_id, "restarts": self.restarts, "nodelist": self.nodelist,
            "started_unix": time.time()})
        log(f"repeat {repeat}: {shlex.join(argv)}")
        srun_log = os.path.join(rdir, "srun.log")
        with open(srun_log, "w") as out:
            proc = subprocess.Popen(argv, cwd=points.ROOT, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        ended_by = None
        try:
            try:
                proc.wait(timeout=point["timeout_s"])
            except subprocess.TimeoutExpired:
                ended_by = "timeout"
                log(f"repeat {repeat}: past timeout_s={point['timeout_s']}; cancelling its step")
                self._stop(proc)
        except BaseException:  # submitit's requeue (SystemExit) or anything else: leave no step
            self._stop(proc, grace=10)
            set_aside(rdir)
            raise
        # A step that failed while the allocation ends was cut short, not failed. (One that
        # succeeded is whole: its records are, and it is recorded.)
        if ended_by is None and proc.returncode != 0 and (self.ending or not job_running(self.job_id)):
            set_aside(rdir)
            raise AllocationEnding(self.ending or "the job is no longer running")
        if ended_by is None and "DUE TO TIME LIMIT" in _read(srun_log):
            ended_by = "timeout"  # srun's --time backstop
        return {}, ended_by

    def _stop(self, proc, grace: float = STEP_GRACE_S) -> None:
        """End the running step: SIGTERM to its ranks (they write their records, as on a
        Slurm cancel), after `grace` seconds the step is killed, and srun last."""
        for signal_name, wait_s in (("TERM", grace), (None, 15)):
            slurm.scancel_steps(self.job_id, signal=signal_name)
            try:
                proc.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue
        proc.kill()
        proc.wait()


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""
