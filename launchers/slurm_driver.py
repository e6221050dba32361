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
"""
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

from submitit.helpers import Checkpointable, DelayedSubmission

from frameworks.common import layout, records
from launchers import driver, points, srun_output, srun_step

STEP_GRACE_S = 30  # how long a timed-out step's ranks get between SIGTERM and SIGKILL
STOP_TERM_S = 10   # the same after a peer failed: the rest are waiting on it, not working
POLL_S = 1.0       # how often a running step's records and srun.log are read
FAILURE_GRACE_S = 30  # launcher.failure_grace_s when the point does not say
PROBE_TIMEOUT_S = 15  # each call that asks Slurm or a node whether it is there


class AllocationEnding(BaseException):
    """The allocation is going away under a repeat: it must not be recorded."""


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} driver: {message}", flush=True)


def hostnames(nodelist: str) -> list:
    return subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                          text=True, timeout=60, check=True).stdout.split()


def this_job() -> str:
    """This job as squeue, scancel and scontrol must name it: `A_T` for task T of array A,
    since an array task's SLURM_JOB_ID can equal A, which names the whole array."""
    array = os.environ.get("SLURM_ARRAY_JOB_ID")
    return f"{array}_{os.environ['SLURM_ARRAY_TASK_ID']}" if array else os.environ["SLURM_JOB_ID"]


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


def slurm_config(keys=("SlurmdPort", "SlurmdTimeout")) -> dict:
    """A few numbers of the controller's configuration (`scontrol show config`)."""
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                             timeout=PROBE_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    found = {}
    for key in keys:
        m = re.search(rf"^{key}\s*=\s*(\d+)", out, re.MULTILINE)
        if m:
            found[key] = int(m.group(1))
    return found


def _sinfo(nodes) -> dict:
    """node -> (sinfo's short state: 'mix', 'down*', 'idle*' (* = not responding), its address)."""
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N %t %o"],
                             capture_output=True, text=True, timeout=PROBE_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {f[0]: (f[1], f[2]) for f in (line.split() for line in out.splitlines()) if len(f) >= 3}


def slurm_sees_it_lost(state: str) -> bool:
    """A sinfo state of a node Slurm itself finds down or not responding ('*')."""
    return state.endswith("*") or state.startswith(("down", "fail"))


def _slurmd_answers(addr: str, port: int) -> str:
    """'' when the node's slurmd accepts a TCP connection (what srun needs from it to
    start a task there) within PROBE_TIMEOUT_S, else why not."""
    try:
        with socket.create_connection((addr, port), timeout=PROBE_TIMEOUT_S):
            return ""
    except OSError as exc:
        return f"its slurmd at {addr}:{port} does not answer ({exc.strerror or exc})"


def unreachable(nodes, port: int) -> dict:
    """node -> why it is down or unreachable, for those of `nodes` that are: Slurm's own
    view first (down, failing, not responding), then a connection to the slurmd of each
    of the others. No probe step: a step that Slurm cannot start or end on a dead node
    leaves a kill queued for it (see `_stop`)."""
    seen, out = _sinfo(nodes), {}
    for node in nodes:
        state, addr = seen.get(node, ("", node))
        if slurm_sees_it_lost(state):
            out[node] = f"sinfo says {state}"
        else:
            why = _slurmd_answers(addr, port)
            if why:
                out[node] = why
    return out


def requeue(job_id: str) -> str:
    """Put the job back in the queue (it is --requeue): '' when Slurm took it, else why not."""
    try:
        r = subprocess.run(["scontrol", "requeue", job_id], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if r.returncode == 0:
        return ""
    return (r.stderr or r.stdout).strip() or f"exit status {r.returncode}"


class StepWatch:
    """What a running step's files say so far, read cheaply: the rank records that
    appeared (each read once: a record is written whole, never rewritten) and srun.log
    (read on from where the last look stopped)."""

    def __init__(self, rdir: str, world: int):
        self.rdir, self.world = rdir, world
        self.records = {}  # rank -> status of its record
        self.text, self._seen = "", 0  # srun.log so far, whole lines; bytes read

    def poll(self) -> None:
        try:
            names = os.listdir(self.rdir)
        except OSError:
            names = []
        for name in names:
            m = layout.RANK_RECORD_RE.match(name)
            rank = int(m.group(1)) if m else None
            if rank is not None and rank not in self.records and rank < self.world:
                try:
                    with open(os.path.join(self.rdir, name)) as f:
                        self.records[rank] = json.load(f).get("status")
                except (OSError, ValueError):
                    pass  # not there after all: the next look reads it
        try:
            with open(os.path.join(self.rdir, layout.SRUN_LOG), "rb") as f:
                f.seek(self._seen)
                new = f.read()
        except OSError:
            return
        whole = new[:new.rfind(b"\n") + 1]  # a line still being written waits for the next look
        self.text += whole.decode(errors="replace")
        self._seen += len(whole)

    def ends(self) -> dict:
        return srun_output.task_ends(self.text)

    def first_bad(self):
        """Why the step already failed, in words, or None: a rank whose record is neither
        ok nor cancelled, or a task srun saw crash or exit non-zero that left no such
        `cancelled` record (a cancelled rank was stopped from outside: not a failure)."""
        for rank, status in sorted(self.records.items()):
            if status not in ("ok", "cancelled"):
                return f"rank {rank} ended {status}"
        for rank, end in sorted(self.ends().items()):
            if srun_output.ended_badly(end) and self.records.get(rank) != "cancelled":
                how = end["signal"] or f"exit code {end['exit_code']}"
                return f"rank {rank} on {end['node']}: {how}"
        return None

    def unended(self) -> set:
        """Ranks neither recorded nor reported ended: the ones a stop now would stop."""
        ends = self.ends()
        return {r for r in range(self.world) if r not in self.records and r not in ends}


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
        self.job_id = this_job()
        self.job_number = os.environ["SLURM_JOB_ID"]  # a number: the port block's slot
        self.restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        self.nodelist = os.environ["SLURM_JOB_NODELIST"]
        self.hosts = hostnames(self.nodelist)
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
        """What the allocation is for: the point's repeats, each an srun step (`start`)."""
        statuses = driver.run_point(self.point_dir, self.start, log=log)
        bad = [f"repeat {r}: {s}" for r, s in enumerate(statuses) if s != "ok"]
        if bad:  # the job's own state then says the point did not complete ok
            raise RuntimeError(f"{len(bad)} of {len(statuses)} repeat(s) not ok ({', '.join(bad)}); "
                               f"see {layout.RUN_FILE} in the repeat folders")
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
        records.write_json_atomic(os.path.join(rdir, layout.STEP_FILE), {
            "argv": argv, "env": srun_step.step_env_additions(point, self.master, port),
            "job_id": self.job_id, "restarts": self.restarts, "nodelist": self.nodelist,
            "started_unix": time.time()})
        log(f"repeat {repeat}: {shlex.join(argv)}")
        srun_log = os.path.join(rdir, layout.SRUN_LOG)
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
                and (self.ending or not job_running(self.job_id)):
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
        conf = slurm_config()
        bad = unreachable(self.suspects, conf.get("SlurmdPort", 6818))
        self.suspects = []
        if not bad:
            log(f"the node(s) of the ranks lost last repeat answer ({time.monotonic() - t0:.0f} s)")
            return
        why = "; ".join(f"{n}: {w}" for n, w in sorted(bad.items()))
        log(f"node(s) unreachable ({why}; probed in {time.monotonic() - t0:.0f} s): no more repeats "
            "in this allocation")
        if self._await_node_failure(sorted(bad), conf):
            return  # they answer again: go on here
        if not self.ending:
            log(f"Slurm has not ended the job: requeueing job {self.job_id}")
            refused = requeue(self.job_id)
            if refused:
                log(f"scontrol requeue {self.job_id} failed: {refused}; the unrecorded repeats "
                    "run when the sweep is submitted again")
        driver.set_aside(rdir)
        raise AllocationEnding(self.ending or f"node(s) {', '.join(sorted(bad))} unreachable")

    def _await_node_failure(self, nodes: list, conf: dict) -> bool:
        """Let Slurm end the job: it sets a node that stopped answering DOWN after
        SlurmdTimeout, kills the job and requeues it (the driver gets SIGTERM). Not
        `scontrol requeue` at once: before the node is DOWN that leaves the requeued job
        unable to start steps with GPUs on Slurm 22.05 ("Invalid generic resource (gres)
        specification"). Waits at most 2 x SlurmdTimeout + 30 s; True when the nodes
        answer again first, False when the allocation ends or the wait is over."""
        limit = 2 * conf.get("SlurmdTimeout", 300) + 30
        log(f"waiting up to {limit} s for Slurm to set {', '.join(nodes)} DOWN and requeue job "
            f"{self.job_id}")
        end, look = time.monotonic() + limit, time.monotonic() + 5
        while not self.ending and time.monotonic() < end:
            time.sleep(POLL_S)
            if time.monotonic() >= look:
                look = time.monotonic() + 5
                if not unreachable(nodes, conf.get("SlurmdPort", 6818)):
                    log(f"{', '.join(nodes)} answer again; going on in this allocation")
                    return True
        return False

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
