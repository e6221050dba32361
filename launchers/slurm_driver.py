"""The driver inside a point's allocation: runs once, on the first node, in the suite's Python.

submitit runs `PointDriver(point_dir)()` as the batch shell itself (launchers/slurm.py
`exec`s the interpreter). It calls launchers.driver.run_point with `start`, which runs
one repeat as one `srun` job step: one task per GPU on every node, MASTER_ADDR the first
host of the allocation, MASTER_PORT the first free block of ports from the job id's slot
(launchers/ports.py), the cluster's `env:` added.

How a repeat ends, and what it leaves:
- its ranks end: run.json from their records (launchers/driver.py);
- a rank ends badly (a record that is not ok, a task srun reports crashed or exiting
  non-zero): the others get launcher.failure_grace_s, then the step gets SIGTERM, then
  SIGKILL, instead of srun waiting on a peer that will never finish (a lost node's);
  run.json names the first cause and the ranks that left no record (docs/slurm.md,
  "How a repeat ends on Slurm");
- it passes timeout_s: the step is cancelled (ranks get SIGTERM), run.json says `timeout`;
  srun's own --time backstop ending it says the same;
- the allocation ends under it (scancel, preemption, `scontrol requeue`, the requeue
  signal before the time limit): NO run.json. The attempt is moved aside whole
  (repeat-NN.interrupted-T, never read by the analysis) and the driver exits; a requeued
  allocation runs the driver again, which skips every recorded repeat and reruns this one.
- a repeat lost ranks without any exit status (their node vanished): before the next
  repeat the driver probes those nodes (sinfo, then their slurmd's port); when one is down
  or unreachable it runs no more repeats, Slurm sets the node DOWN and requeues the job
  (`scontrol requeue` by the driver if Slurm does not), and the driver exits as above, so
  the unrecorded repeats run in a new allocation instead of hanging on the dead node.

Beside it: launchers/step_watch.py reads a running step's files, launchers/slurm_nodes.py
asks Slurm and the nodes (hosts, job state, lost nodes, requeue), launchers/srun_step.py
builds the step's srun line.
"""
import os
import shlex
import signal
import subprocess
import sys
import time

from submitit.helpers import Checkpointable, DelayedSubmission

from contract import paths, records
from launchers import driver, points, preflight, slurm_nodes, srun_output, srun_step
from launchers.step_watch import StepWatch

STEP_GRACE_S = 30  # how long a timed-out step's ranks get between SIGTERM and SIGKILL
STOP_TERM_S = 10   # the same after a peer failed: the rest are waiting on it, not working
POLL_S = 1.0       # how often a running step's records and srun.log are read
FAILURE_GRACE_S = 30  # launcher.failure_grace_s when the point does not say


class AllocationEnding(BaseException):
    """The allocation is going away under a repeat: it must not be recorded."""


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} driver: {message}", flush=True)


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
        self.job_id = slurm_nodes.this_job()
        self.job_number = os.environ["SLURM_JOB_ID"]  # a number: the port block's slot
        self.restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        self.nodelist = os.environ["SLURM_JOB_NODELIST"]
        self.hosts = slurm_nodes.hostnames(self.nodelist)
        self.master = self.hosts[0]
        self.suspects = []  # nodes where the last repeat lost ranks without an exit status
        self.lingering = None  # an srun the driver stopped that still waits on such a node
        log(f"job {self.job_id} (start {self.restarts + 1}) on {os.uname().nodename}: "
            f"nodes {self.nodelist}, MASTER_ADDR={self.master}")
        try:
            return self.run()
        except AllocationEnding as exc:
            raise SystemExit(f"driver: the allocation is ending ({exc}); unrecorded repeats "
                             "rerun when the job is requeued or the sweep resubmitted")

    def run(self):
        """What the allocation is for: the point's repeats, each an srun step (`start`),
        once its nodes pass the preflight, where the point asks for one."""
        if not preflight.on_slurm(self, log):
            return "preflight: this allocation is given back (launchers/preflight.py)"
        statuses = driver.run_point(self.point_dir, self.start, log=log)
        bad = [f"repeat {r}: {s}" for r, s in enumerate(statuses) if s != "ok"]
        if bad:  # the job's own state then says the point did not complete ok
            raise RuntimeError(f"{len(bad)} of {len(statuses)} repeat(s) not ok ({', '.join(bad)}); "
                               f"see {paths.RUN_FILE} in the repeat folders")
        return statuses

    def _on_sigterm(self, signum, frame):
        self.ending = "SIGTERM"
        log("got SIGTERM: the allocation is ending")

    def start(self, point: dict, spec_path: str, rdir: str):
        """Run one repeat as one srun step -> (rank_ends, ended_by) (launchers/driver.py)."""
        if self.ending:
            driver.set_aside(rdir)
            raise AllocationEnding(self.ending)
        self._leave_lost_nodes(rdir)
        self._end_lingering()
        repeat = records.read_spec(spec_path)["repeat"]
        job_min = srun_step.time_limit_min(point)
        argv = srun_step.srun_argv(point, spec_path, rdir, sys.executable, job_min)
        port = srun_step.master_port(point, self.job_number)
        env = srun_step.step_env(point, self.master, port)
        records.write_json_atomic(os.path.join(rdir, paths.STEP_FILE), {
            "argv": argv, "env": srun_step.step_env_additions(point, self.master, port),
            "job_id": self.job_id, "restarts": self.restarts, "nodelist": self.nodelist,
            "started_unix": time.time()})
        log(f"repeat {repeat}: {shlex.join(argv)}")
        srun_log = os.path.join(rdir, paths.SRUN_LOG)
        with open(srun_log, "w") as out:
            proc = subprocess.Popen(argv, cwd=points.ROOT, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        watch = StepWatch(rdir, point["world_size"])
        try:
            ended_by, failed, stopped = self._watch(proc, watch, point, repeat)
        except BaseException:  # submitit's requeue (SystemExit) or anything else: leave no step
            self._stop(proc, grace=10)
            driver.set_aside(rdir)
            raise
        watch.poll()  # srun's last words
        # A step that failed while the allocation ends was cut short, not failed; unless a
        # rank had failed of itself before (the allocation may be ending because its node
        # died). One that succeeded is whole: its records are, and it is recorded.
        if ended_by is None and not failed and proc.returncode != 0 \
                and (self.ending or not slurm_nodes.job_running(self.job_id)):
            driver.set_aside(rdir)
            raise AllocationEnding(self.ending or "the job is no longer running")
        if ended_by is None and "DUE TO TIME LIMIT" in watch.text:
            ended_by = "timeout"  # srun's --time backstop
        rank_ends = self._rank_ends(point, watch, proc.returncode, stopped)
        # Nodes to probe before the next repeat: where ranks vanished without a word.
        self.suspects = sorted({e["node"] for r, e in rank_ends.items() if e["node"]
                                and r not in watch.records and e["exit_code"] is None
                                and not e["signal"]} | set(srun_output.failed_nodes(watch.text)))
        return rank_ends, ended_by

    def _watch(self, proc, watch: StepWatch, point: dict, repeat: int):
        """Wait for srun, reading the step's files every POLL_S -> (ended_by, failed,
        stopped ranks). A rank that ends badly starts launcher.failure_grace_s for the
        others; past it, or past timeout_s, the driver stops the step itself."""
        deadline = time.monotonic() + point["timeout_s"]
        grace = float((point.get("launcher") or {}).get("failure_grace_s", FAILURE_GRACE_S))
        failed_at = None
        while proc.poll() is None:
            watch.poll()
            now = time.monotonic()
            if now >= deadline:
                log(f"repeat {repeat}: past timeout_s={point['timeout_s']}; cancelling its step")
                return "timeout", failed_at is not None, self._stop_ranks(proc, watch, STEP_GRACE_S)
            if failed_at is None and not self.ending:
                why = watch.first_bad()
                if why:
                    failed_at = now
                    log(f"repeat {repeat}: {why}; the other ranks have {grace:g} s to end")
            if failed_at is not None and (now - failed_at >= grace or self.ending):
                left = sorted(watch.unended())
                log(f"repeat {repeat}: rank(s) {left} still running {now - failed_at:.0f} s after "
                    "a failure; cancelling the step")
                return None, True, self._stop_ranks(proc, watch, STOP_TERM_S, kill_wait=12)
            try:
                proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                pass
        return None, failed_at is not None, set()

    def _stop_ranks(self, proc, watch: StepWatch, grace: float, kill_wait: float = 15) -> set:
        """Stop the step; the ranks it stops are the ones with no known end yet. An srun
        that still waits after SIGKILL (on a lost node's tasks) is left running until the
        next repeat (`_end_lingering`)."""
        watch.poll()
        running = watch.unended()
        if self.ending:  # the allocation ends: KillWait (30 s by default) before SIGKILL
            self._stop(proc, grace=1, kill_wait=5)
        elif not self._stop(proc, grace=grace, kill_wait=kill_wait, leave=True):
            self.lingering = proc
            log(f"srun still waits on rank(s) {sorted(watch.unended())} after SIGKILL: left to "
                "Slurm (killing it would queue a kill for their node)")
        return running

    def _rank_ends(self, point: dict, watch: StepWatch, srun_code: int, stopped: set) -> dict:
        """rank -> {exit_code, signal, node, stopped}. srun reports the tasks that ended
        badly; one it did not report exited 0 if srun succeeded or the rank wrote its record,
        else its end is unknown (None: srun gave up on it, e.g. on a node that vanished).
        Rank r runs on node r // gpus_per_node (block distribution, --ntasks-per-node)."""
        ends, gpn = watch.ends(), point["gpus_per_node"]
        out = {}
        for rank in range(point["world_size"]):
            node = self.hosts[rank // gpn] if rank // gpn < len(self.hosts) else None
            end = ends.get(rank) or {"exit_code": 0 if srun_code == 0 or rank in watch.records
                                     else None, "signal": None}
            out[rank] = {"exit_code": end["exit_code"], "signal": end["signal"], "node": node,
                         "stopped": rank in stopped}
        return out

    def _leave_lost_nodes(self, rdir: str) -> None:
        """Run no repeat on a node that is gone: when the last repeat lost ranks without an
        exit status, probe their nodes; if one is down or unreachable, end this allocation
        so that the job is requeued (recorded repeats stay recorded; this one and the rest
        run in the next allocation)."""
        if not self.suspects:
            return
        t0 = time.monotonic()
        conf = slurm_nodes.slurm_config()
        bad = slurm_nodes.unreachable(self.suspects, conf.get("SlurmdPort", 6818))
        self.suspects = []
        if not bad:
            log(f"the node(s) of the ranks lost last repeat answer ({time.monotonic() - t0:.0f} s)")
            return
        why = "; ".join(f"{n}: {w}" for n, w in sorted(bad.items()))
        log(f"node(s) unreachable ({why}; probed in {time.monotonic() - t0:.0f} s): no more repeats "
            "in this allocation")
        if slurm_nodes.await_node_failure(sorted(bad), conf, self.job_id,
                                          lambda: self.ending, log, POLL_S):
            return  # they answer again: go on here
        if not self.ending:
            log(f"Slurm has not ended the job: requeueing job {self.job_id}")
            refused = slurm_nodes.requeue(self.job_id)
            if refused:
                log(f"scontrol requeue {self.job_id} failed: {refused}; the unrecorded repeats "
                    "run when the sweep is submitted again")
        driver.set_aside(rdir)
        raise AllocationEnding(self.ending or f"node(s) {', '.join(sorted(bad))} unreachable")

    def _stop(self, proc, grace: float = STEP_GRACE_S, kill_wait: float = 15,
              leave: bool = False) -> bool:
        """End the running step: SIGTERM to its ranks (they write their records, as on a
        Slurm cancel), after `grace` seconds SIGKILL, and srun last, unless `leave`.
        Returns whether srun has ended.

        srun waits on a lost node's tasks until Slurm sets the node DOWN. Ending it then,
        like a plain `scancel STEP` (or srun's --kill-on-bad-exit), makes the controller
        queue a SIGKILL for those tasks, retried about every minute until the node answers
        again, where it kills the same-numbered step of the requeued job (Slurm 22.05).
        Signals (`scancel --signal`) are not queued."""
        for signal_name, wait_s in (("TERM", grace), ("KILL", kill_wait)):
            until = time.monotonic() + wait_s  # scancel itself can take seconds (a dead node's)
            srun_step.scancel_steps(self.job_id, signal=signal_name)
            try:
                proc.wait(timeout=max(0.1, until - time.monotonic()))
                return True
            except subprocess.TimeoutExpired:
                continue
        if leave:
            return False
        proc.kill()
        proc.wait()
        return True

    def _end_lingering(self) -> None:
        """Before the next step: an srun left waiting on a node that answers again (or
        that no rank of the last repeat lost) can go now."""
        proc, self.lingering = self.lingering, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
