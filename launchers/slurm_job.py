"""One Slurm batch job of launcher=slurm: its sbatch options, submitit's executor and the
script it writes, the environment sbatch is called in, what submission needs, and the
job's record (SWEEP/points/<point>/slurm.json). Both the sweep's submission
(launchers/slurm.py) and a search's (launchers/slurm_search.py) build their jobs here, so
neither imports the other's module for them; so does the driver's preflight
(launchers/preflight.py), which resubmits its point without its sick nodes (`submit_group`'s
`exclude`), and `launch health`'s one job (launchers/health.py).
"""
import contextlib
import os
import shlex
import shutil
import sys
import time

from contract import paths, records
from launchers import points, srun_step

# Variables of an outer job or step that must not reach a nested submission (sbatch exports
# the submitting environment into the job, and srun/sbatch read these as defaults).
OUTER_JOB_PREFIXES = ("SLURM_", "SRUN_", "SALLOC_")
KEEP = ("SLURM_CONF",)  # which cluster to talk to: the submitter's choice, not an outer job's


def submitit_folder(point) -> str:
    """One folder per sweep: a job array's tasks share submitit's folder."""
    return paths.submitit_dir(paths.sweep_of(point["dir"]))


def executor_parameters(point) -> dict:
    """submitit SlurmExecutor parameters (sbatch options) for the point's allocation."""
    cl, ln = srun_step.cluster(point), srun_step.launcher(point)
    gpn = point["gpus_per_node"]
    params = {"job_name": f"dlbench-{point['point']}", "nodes": point["nodes"],
              "ntasks_per_node": gpn, "time": srun_step.time_limit_min(point),
              "use_srun": False,          # the driver runs once, on the first node
              "stderr_to_stdout": True,   # one driver log: SWEEP/points/<p>/slurm/<job>_0_log.out
              "signal_delay_s": int(ln.get("signal_delay_s", 120))}
    if cl.get("gpus"):
        params["gpus_per_node"] = gpn
    for key in ("partition", "account", "qos", "constraint", "cpus_per_task", "mem"):
        if cl.get(key) not in (None, ""):
            params[key] = cl[key]
    if cl.get("exclusive"):
        params["exclusive"] = True
    extra = {
        "requeue": True,                  # preemption and `scontrol requeue` put it back in the queue
        # The requeue-before-the-time-limit signal goes to the batch shell only (the driver,
        # see `python` below), never to the job steps: the ranks would die of it.
        "signal": f"B:{_usr_sig()}@{params['signal_delay_s']}",
        "chdir": str(points.ROOT),        # the driver unpickles launchers.* from here
    }
    extra.update({str(k): v for k, v in (cl.get("sbatch_args") or {}).items()})
    params["additional_parameters"] = extra
    return params


def _usr_sig() -> str:
    from submitit.core.job_environment import JobEnvironment
    return JobEnvironment.USR_SIG


def make_executor(point, require_srun: bool = True, array: int = 0, job_name: str = None,
                  folder: str = None):
    """submitit's SlurmExecutor for the point, or for a job array of `array` points shaped
    like it. The batch script `exec`s the driver's Python, so the driver IS the batch shell
    and gets the allocation's signals itself."""
    from submitit import SlurmExecutor

    class _Executor(SlurmExecutor):
        @classmethod
        def affinity(cls):  # a dry run needs no Slurm installed
            return SlurmExecutor.affinity() if require_srun else 2

    ex = _Executor(folder=folder or submitit_folder(point),
                   max_num_timeout=int(srun_step.launcher(point).get("max_requeues", 3)),
                   python="exec " + shlex.quote(sys.executable))
    ex.update_parameters(**executor_parameters(point))
    if array > 1:  # every task of the array may run at once: no throttle of submitit's own
        ex.update_parameters(array_parallelism=array, **({"job_name": job_name} if job_name else {}))
    return ex


def sbatch_script(point, array: int = 0, job_name: str = None) -> str:
    """The sbatch script exactly as submitit writes it for this point, or for a job array of
    `array` points shaped like it."""
    ex = make_executor(point, require_srun=False, array=array, job_name=job_name)
    if array > 1:  # as submitit's _internal_process_submissions sets it for a batch
        ex.parameters["map_count"] = array
    return ex._make_submission_file_text(ex._submitit_command_str, "dry-run")


@contextlib.contextmanager
def submission_environ():
    """os.environ without an outer job's Slurm variables, for the sbatch call (submitit
    runs sbatch with os.environ, and sbatch exports it into the job)."""
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith(OUTER_JOB_PREFIXES) and k not in KEEP]:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def read_slurm_json(point_dir: str):
    return records.read_json(os.path.join(point_dir, paths.SLURM_FILE))


def preflight(pts: list) -> None:
    """What submission needs, for every point, before any is written or queued."""
    for point in pts:
        if not srun_step.container_image(point):
            try:
                points.worker_argv(point, paths.SPEC_FILE, sys.executable)
            except points.WorkerUnavailable as exc:
                raise points.ConfigError(str(exc)) from None
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise points.ConfigError("launcher=slurm needs sbatch and srun on PATH (a Slurm login node)")


def submit_group(group: list, make_driver, job_name: str = None, exclude=()) -> None:
    """One sbatch for the group [(point, its previous slurm.json or None, whether its folder
    is new)]: a job array (a plain job for one point) named `job_name`, each task running
    make_driver(point), none on the nodes of `exclude`. Each point's job id (`123_4` in an
    array) and driver log go to its slurm.json."""
    first = group[0][0]
    executor = make_executor(first, array=len(group), job_name=job_name)
    if exclude:
        executor.update_parameters(exclude=",".join(sorted(exclude)))
    try:
        with submission_environ():
            with executor.batch():
                jobs = [executor.submit(make_driver(p)) for p, _, _ in group]
    except Exception as exc:  # sbatch refused: say why in one line
        for p, _, fresh in group:
            if fresh:  # leave no point that looks submitted
                shutil.rmtree(p["dir"], ignore_errors=True)
        message = " ".join(str(exc).split())
        names = first["point"] + (f" and {len(group) - 1} more" if len(group) > 1 else "")
        raise points.ConfigError(f"sbatch refused {names}: {message[-400:]}") from None
    now = time.time()
    for (point, prev, _), job in zip(group, jobs):
        info = {"schema": paths.SLURM_SCHEMA, "version": paths.SCHEMA_VERSION,
                "point": point["point"], "job_id": str(job.job_id),
                "submitit_folder": submitit_folder(point), "log": str(job.paths.stdout),
                "submitted_unix": now, "time_min": srun_step.time_limit_min(point),
                "previous_jobs": ([prev["job_id"]] + prev.get("previous_jobs", [])) if prev else [],
                **({"exclude": sorted(exclude)} if exclude else {})}
        records.write_json_atomic(os.path.join(point["dir"], paths.SLURM_FILE), info)
        print(f"{point['point']}: queued as Slurm job {job.job_id}")
