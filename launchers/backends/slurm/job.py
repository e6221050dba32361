"""One Slurm batch job of launcher=slurm: its sbatch options, submitit's executor and the
script it writes, the environment sbatch is called in, what submission needs, the sbatch
call itself (`submit`: a refusal said in one line) and the job's record
(SWEEP/points/<point>/slurm.json, `record`). Every job of the Slurm launcher object
(launchers/backends/slurm/launcher.py) is built and submitted here: a sweep's job arrays,
a search's one job, a preflight's resubmission without its sick nodes, `launch health`'s job.
"""
import contextlib
import io
import os
import shlex
import shutil
import sys
import time

from contract import paths, records
from launchers.backends import containers, secret_env, worker
from launchers.backends.slurm import srun
from launchers.health import step as health_step
from launchers.suite import ROOT, ConfigError

# Variables of an outer job or step that must not reach a nested submission (sbatch exports
# the submitting environment into the job, and srun/sbatch read these as defaults).
OUTER_JOB_PREFIXES = ("SLURM_", "SRUN_", "SALLOC_")
KEEP = ("SLURM_CONF",)  # which cluster to talk to: the submitter's choice, not an outer job's


def submitit_folder(point) -> str:
    """One folder per sweep: a job array's tasks share submitit's folder."""
    return paths.submitit_dir(point.sweep)


def executor_parameters(point) -> dict:
    """submitit SlurmExecutor parameters (sbatch options) for the point's allocation."""
    cl = point.cluster
    gpn = point.gpus_per_node
    params = {"job_name": f"dlbench-{point.name}", "nodes": point.nodes,
              "ntasks_per_node": gpn, "time": srun.time_limit_min(point),
              "use_srun": False,          # the driver runs once, on the first node
              "stderr_to_stdout": True,   # one driver log: SWEEP/points/<p>/slurm/<job>_0_log.out
              "signal_delay_s": int(point.launcher.signal_delay_s)}
    if cl.gpus:
        params["gpus_per_node"] = gpn
    for key in ("partition", "account", "qos", "constraint", "cpus_per_task", "mem"):
        if getattr(cl, key) not in (None, ""):
            params[key] = getattr(cl, key)
    if cl.exclusive:
        params["exclusive"] = True
    extra = {
        "requeue": True,                  # preemption and `scontrol requeue` put it back in the queue
        # The requeue-before-the-time-limit signal goes to the batch shell only (the driver,
        # see `python` below), never to the job steps: the ranks would die of it.
        "signal": f"B:{_usr_sig()}@{params['signal_delay_s']}",
        "chdir": str(ROOT),        # the driver unpickles launchers.* from here
    }
    extra.update({str(k): v for k, v in cl.sbatch_args.as_dict().items()})
    params["additional_parameters"] = extra
    return params


def _usr_sig() -> str:
    from submitit.core.job_environment import JobEnvironment
    return JobEnvironment.USR_SIG


def make_executor(point, require_srun: bool = True, array: int = 0, job_name: str | None = None,
                  folder: str | None = None):
    """submitit's SlurmExecutor for the point, or for a job array of `array` points shaped
    like it. The batch script `exec`s the driver's Python, so the driver IS the batch shell
    and gets the allocation's signals itself."""
    from submitit import SlurmExecutor

    class _Executor(SlurmExecutor):
        @classmethod
        def affinity(cls):  # a dry run needs no Slurm installed
            return SlurmExecutor.affinity() if require_srun else 2

    ex = _Executor(folder=folder or submitit_folder(point),
                   max_num_timeout=int(point.launcher.max_requeues),
                   python="exec " + shlex.quote(sys.executable))
    ex.update_parameters(**executor_parameters(point))
    if array > 1:  # every task of the array may run at once: no throttle of submitit's own
        ex.update_parameters(array_parallelism=array, **({"job_name": job_name} if job_name else {}))
    return ex


def sbatch_script(point, array: int = 0, job_name: str | None = None) -> str:
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
    """What submission needs, for every point, before any is written or queued: its
    container runtime and image (the health step's PyTorch image too, with preflight=true),
    else its framework's interpreter."""
    for point in pts:
        containers.require(point)
        if point.preflight:
            containers.require(health_step.as_pytorch(point))
        if not point.container_image:
            worker.require(point)
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise ConfigError("launcher=slurm needs sbatch and srun on PATH (a Slurm login node)")


def submit(executor, drivers: list, what: str, points: list) -> list:
    """One sbatch: a job array of the drivers (a plain job for one) -> submitit's jobs.
    sbatch refusing it is ConfigError, in one line that names `what`. The `points`' secrets
    ride in sbatch's environment (secret_env.py); a driver that carries a point pickles it
    masked (sweepdir.as_written)."""
    # submitit echoes a refusing sbatch's stderr: it is the line below, said once
    try:
        with submission_environ(), secret_env.exported(points), \
                contextlib.redirect_stderr(io.StringIO()):
            with executor.batch():
                return [executor.submit(driver) for driver in drivers]
    except ConfigError:
        raise
    except Exception as exc:  # sbatch refused: say why in one line
        message = " ".join(str(exc).split())
        raise ConfigError(f"sbatch refused {what}: {message[-400:]}") from None


def record(point, job, previous=None, time_min=None, **more) -> dict:
    """The point's job record (slurm.json), written: this job, its log, the jobs before it."""
    info = {"schema": paths.SLURM_SCHEMA, "version": paths.SCHEMA_VERSION,
            "point": point.name, "job_id": str(job.job_id),
            "submitit_folder": submitit_folder(point), "log": str(job.paths.stdout),
            "submitted_unix": time.time(), "time_min": time_min or srun.time_limit_min(point),
            "previous_jobs": ([previous["job_id"]] + previous.get("previous_jobs", []))
            if previous else [], **more}
    records.write_json_atomic(os.path.join(point.dir, paths.SLURM_FILE), info)
    return info


def submit_group(group: list, driver, job_name: str | None = None, exclude=()) -> list:
    """One sbatch for the group [(point, its previous slurm.json or None, whether its folder
    is new)]: a job array (a plain job for one point) named `job_name`, each task running
    driver(point's folder), none on the nodes of `exclude`. Each point's job id (`123_4` in an
    array) and driver log go to its slurm.json."""
    first = group[0][0]
    executor = make_executor(first, array=len(group), job_name=job_name)
    if exclude:
        executor.update_parameters(exclude=",".join(sorted(exclude)))
    names = first.name + (f" and {len(group) - 1} more" if len(group) > 1 else "")
    try:
        jobs = submit(executor, [driver(p.dir) for p, _, _ in group], names, [p for p, _, _ in group])
    except ConfigError:
        for p, _, fresh in group:
            if fresh:  # leave no point that looks submitted
                shutil.rmtree(p.dir, ignore_errors=True)
        raise
    for (point, prev, _), job in zip(group, jobs):
        record(point, job, prev, **({"exclude": sorted(exclude)} if exclude else {}))
        print(f"{point.name}: queued as Slurm job {job.job_id}")
    return jobs
