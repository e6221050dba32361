"""Job states from Slurm: squeue (the controller, current) and sacct (accounting, final).

Every call is an argument list with a time limit. States are reduced to the suite's few:
PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, OOM, CANCELLED.
"""
import subprocess

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


def _rows(out, ids) -> dict:
    """job id -> the rest of its line after the first '|', for the lines of `out` (squeue's
    or sacct's `-o ID|...` output) whose job id is one of `ids`."""
    rows = {}
    for line in (out or "").splitlines():
        job, _, rest = line.partition("|")
        if job in ids:
            rows[job] = rest
    return rows


def squeue_jobs(job_ids, timeout: float = 30) -> dict:
    """job id -> {state, reason} for the jobs the controller still holds (pending, running,
    or ended within MinJobAge); jobs it has forgotten are absent. `reason` is squeue's %r:
    why a pending job waits (Resources, Priority, BeginTime, ReqNodeNotAvail, ...), None
    when it says none."""
    ids = sorted({str(j) for j in job_ids})
    if not ids:
        return {}
    fmt = ["-o", "%i|%T|%r"]
    out = _run(["squeue", "-h", "--states=all", "-j", ",".join(ids), *fmt], timeout)
    if out is None and len(ids) > 1:  # one unknown id can fail the whole call: ask one by one
        out = "".join(_run(["squeue", "-h", "--states=all", "-j", j, *fmt], timeout) or ""
                      for j in ids)
    jobs = {}
    for job, rest in _rows(out, ids).items():
        state, _, reason = rest.partition("|")
        reason = reason.strip()
        jobs[job] = {"state": normalize(state), "reason": None if reason in ("", "None") else reason}
    return jobs


def squeue_states(job_ids, timeout: float = 30) -> dict:
    """job id -> state, as squeue_jobs."""
    return {j: info["state"] for j, info in squeue_jobs(job_ids, timeout).items()}


def sacct_states(job_ids, timeout: float = 60) -> dict:
    """job id -> final-or-not state from accounting; {} where accounting is off."""
    ids = sorted({str(j) for j in job_ids})
    if not ids:
        return {}
    out = _run(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(ids)], timeout)
    return {job: normalize(state) for job, state in _rows(out, ids).items()}


def jobs(job_ids) -> dict:
    """job id -> {state, reason}: the controller's while it holds the job (sacct lags it by
    seconds and learns a start late), else accounting's state (no reason); state None
    where neither knows the job. One squeue call for all jobs, one sacct for the rest."""
    ids = [str(j) for j in job_ids]
    out = squeue_jobs(ids)
    missing = [j for j in ids if j not in out]
    for job, state in (sacct_states(missing) if missing else {}).items():
        out[job] = {"state": state, "reason": None}
    return {j: out.get(j, {"state": None, "reason": None}) for j in ids}


def job_states(job_ids) -> dict:
    """job id -> state, as jobs()."""
    return {j: info["state"] for j, info in jobs(job_ids).items()}
