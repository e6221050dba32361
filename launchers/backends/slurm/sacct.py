"""Job states from Slurm: squeue (the controller, current) and sacct (accounting, final).

Every call is an argument list with a time limit, and asks about every job at once: a
sweep's status costs one squeue and one sacct call, not one per point. Job ids are a plain
job's (`123`) or a job array task's (`123_4`). States are reduced to the suite's few:
PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, OOM, CANCELLED.
"""
import re
import subprocess

JOB_ID = re.compile(r"\d+(_\d+)?")
ARRAY_RANGE = re.compile(r"(\d+)_\[([^\]]*)\]")  # tasks of an array not started yet
FINAL = ("COMPLETED", "FAILED", "TIMEOUT", "OOM", "CANCELLED")
_STATES = {
    "PENDING": "PENDING", "REQUEUED": "PENDING", "REQUEUE_FED": "PENDING",
    "REQUEUE_HOLD": "PENDING", "RESV_DEL_HOLD": "PENDING", "CONFIGURING": "PENDING",
    "RUNNING": "RUNNING", "COMPLETING": "RUNNING", "SIGNALING": "RUNNING",
    "STAGE_OUT": "RUNNING", "RESIZING": "RUNNING", "SUSPENDED": "RUNNING", "STOPPED": "RUNNING",
    "COMPLETED": "COMPLETED",
    "FAILED": "FAILED", "NODE_FAIL": "FAILED", "BOOT_FAIL": "FAILED", "DEADLINE": "FAILED",
    "SPECIAL_EXIT": "FAILED",
    "TIMEOUT": "TIMEOUT",
    "OUT_OF_MEMORY": "OOM",
    "CANCELLED": "CANCELLED", "PREEMPTED": "CANCELLED", "REVOKED": "CANCELLED",
}


def normalize(raw: str):
    """'CANCELLED by 0' -> CANCELLED, 'OUT_OF_MEMORY' -> OOM, 'REQUEUED' -> PENDING."""
    word = (raw or "").strip().split(" ")[0].rstrip("+").upper()
    return _STATES.get(word, word or None)


def _run(argv, timeout):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def _base(job: str) -> str:
    """The id to ask Slurm for: an array task's array (`123_4` -> `123`: squeue -r then lists
    each task, and sacct lists a task still pending only under its array), else the job's."""
    return job.split("_")[0]


def _ids_of(field: str) -> list:
    """The job ids one JobID field of squeue or sacct stands for: `123`, `123_4`, or an array's
    tasks not yet started, `123_[0-3,7%2]` (after % the throttle, not a task)."""
    m = ARRAY_RANGE.fullmatch(field)
    if not m:
        return [field]
    out = []
    for part in m.group(2).split("%")[0].split(","):
        first, _, rest = part.partition("-")
        last, _, step = rest.partition(":")
        if first.isdigit() and (not last or last.isdigit()) and (not step or step.isdigit()):
            out += [f"{m.group(1)}_{i}" for i in range(int(first), int(last or first) + 1, int(step or 1))]
    return out


def _rows(out, ids) -> dict:
    """job id -> the rest of its line after the first '|', for the lines of `out` (squeue's
    or sacct's `-o ID|...` output) that name one of `ids`; a task's own line wins over its
    array's range line."""
    rows = {}
    for line in (out or "").splitlines():
        field, _, rest = line.partition("|")
        named = _ids_of(field)
        for job in named:
            if job in ids and (len(named) == 1 or job not in rows):
                rows[job] = rest
    return rows


def _asked(job_ids) -> tuple:
    """(the well-formed ids among job_ids, a plain job's `123` or an array task's `123_4`;
    the ids to ask Slurm for, joined: each array once)."""
    ids = sorted({str(j) for j in job_ids if JOB_ID.fullmatch(str(j))})
    return ids, ",".join(sorted({_base(j) for j in ids}))


def squeue_jobs(job_ids, timeout: float = 30) -> dict:
    """job id -> {state, reason} for the jobs the controller still holds (pending, running,
    or ended within MinJobAge); jobs it has forgotten are absent. `reason` is squeue's %r:
    why a pending job waits (Resources, Priority, BeginTime, ReqNodeNotAvail, ...), None
    when it says none. One squeue call, however many jobs: unknown ids among several are
    left out by squeue itself (one unknown id alone fails the call: then nothing is known)."""
    ids, asked = _asked(job_ids)
    if not ids:
        return {}
    out = _run(["squeue", "-h", "-r", "--states=all", "-j", asked, "-o", "%i|%T|%r"], timeout)
    jobs = {}
    for job, rest in _rows(out, set(ids)).items():
        state, _, reason = rest.partition("|")
        reason = reason.strip()
        jobs[job] = {"state": normalize(state), "reason": None if reason in ("", "None") else reason}
    return jobs


def squeue_states(job_ids, timeout: float = 30) -> dict:
    """job id -> state, as squeue_jobs."""
    return {j: info["state"] for j, info in squeue_jobs(job_ids, timeout).items()}


def accounting(job_ids, timeout: float = 60):
    """job id -> final-or-not state from accounting, for the jobs it knows; None where
    accounting does not answer (no sacct, no slurmdbd, a time-out). One call."""
    ids, asked = _asked(job_ids)
    if not ids:
        return {}
    out = _run(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", asked], timeout)
    if out is None:
        return None
    return {job: normalize(state) for job, state in _rows(out, set(ids)).items()}


def sacct_states(job_ids, timeout: float = 60) -> dict:
    """job id -> final-or-not state from accounting; {} where accounting is off. One call."""
    return accounting(job_ids, timeout) or {}


def jobs(job_ids) -> dict:
    """job id -> {state, reason}: the controller's while it holds the job (sacct lags it by
    seconds and learns a start late), else accounting's state (no reason); state None
    where neither knows the job. At most two calls, whatever the number of jobs: one
    squeue for all, one sacct for those squeue does not know."""
    ids = [str(j) for j in job_ids]
    out = squeue_jobs(ids)
    missing = [j for j in ids if j not in out]
    for job, state in (sacct_states(missing) if missing else {}).items():
        out[job] = {"state": state, "reason": None}
    return {j: out.get(j, {"state": None, "reason": None}) for j in ids}

