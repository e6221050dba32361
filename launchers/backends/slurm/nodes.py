"""What Slurm and the nodes say about a running allocation, asked from inside it: its hosts,
its own job id, whether the controller still runs it, a few numbers of its configuration,
which of its nodes are lost, and how to put it back in the queue.

The allocation's launcher object (launchers/backends/slurm/launcher.py) asks these between
repeats and names the allocation's hosts with them. Each call is bounded: a node or
controller that does not answer costs seconds, never a hang.
"""
import os
import re
import socket
import subprocess
import time

PROBE_TIMEOUT_S = 15  # each call that asks Slurm or a node whether it is there


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


def partition_nodes(partition=None) -> dict:
    """node -> sinfo's short state, for every node of `partition` (the default one when None)."""
    argv = ["sinfo", "-h", "-N", "-o", "%N %t"] + (["-p", str(partition)] if partition else [])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {f[0]: f[1] for f in (line.split() for line in out.splitlines()) if len(f) >= 2}


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
    leaves a kill queued for it (step_watch.SrunRanks.abandon)."""
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


def await_node_failure(nodes: list, conf: dict, job_id: str, ending, log, poll_s: float = 1.0) -> bool:
    """Let Slurm end the job: it sets a node that stopped answering DOWN after
    SlurmdTimeout, kills the job and requeues it (the driver gets SIGTERM: `ending()`
    turns true). Not `scontrol requeue` at once: before the node is DOWN that leaves the
    requeued job unable to start steps with GPUs on Slurm 22.05 ("Invalid generic resource
    (gres) specification"). Waits at most 2 x SlurmdTimeout + 30 s; True when the nodes
    answer again first, False when the allocation ends or the wait is over."""
    limit = 2 * conf.get("SlurmdTimeout", 300) + 30
    log(f"waiting up to {limit} s for Slurm to set {', '.join(nodes)} DOWN and requeue job {job_id}")
    end, look = time.monotonic() + limit, time.monotonic() + 5
    while not ending() and time.monotonic() < end:
        time.sleep(poll_s)
        if time.monotonic() >= look:
            look = time.monotonic() + 5
            if not unreachable(nodes, conf.get("SlurmdPort", 6818)):
                log(f"{', '.join(nodes)} answer again; going on in this allocation")
                return True
    return False
