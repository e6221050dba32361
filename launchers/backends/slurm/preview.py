"""`dry_run=true` with launcher=slurm: what each point would run, submitting nothing. The
sbatch script exactly as submitit would write it (one per job array), the step environment
and the srun line of every step (the preflight's health step first, where asked)."""
import os
import shlex
import sys

from contract import paths
from launchers.backends.slurm import job, srun
from launchers.backends.worker import WorkerUnavailable
from launchers.suite import ROOT


def point_text(point, script: bool = True) -> str:
    """What the point would run: its sbatch script (unless its array's is printed instead)
    and the srun line of every repeat."""
    job_min = srun.time_limit_min(point)
    out = [f"# ==== {point.name}: one allocation of {point.nodes} node(s) x "
           f"{point.gpus_per_node} task(s); {point.repeats} repeat(s), each an srun step"]
    if script:
        out += [f"# sbatch script (submitit writes it to {job.submitit_folder(point)}/<job>_submission.sh):",
                job.sbatch_script(point).rstrip("\n")]
    out += ["# step environment, added to the driver's (which drops stale RANK/WORLD_SIZE/... "
            "and per-step SLURM_* variables):"]
    adds = srun.step_env_additions(point, "<first host of `scontrol show hostnames $SLURM_JOB_NODELIST`>",
                                   srun.port_rule_text(point))
    adds["PYTHONPATH"] = f"{ROOT}:$PYTHONPATH"
    out += [f"#   {k}={v}" for k, v in adds.items()]
    if point.preflight:
        hdir = paths.health_attempt_dir(point.dir, 0)
        spec = os.path.join(hdir, paths.SPEC_FILE)
        out += ["# preflight=true: first the health checks, one step (docs/health.md):",
                shlex.join(srun.health_argv(point, spec, hdir, sys.executable))]
    for repeat, rdir in enumerate(point.repeat_dirs):
        try:
            line = shlex.join(srun.repeat_argv(point, os.path.join(rdir, paths.SPEC_FILE), rdir,
                                               sys.executable, job_min))
        except WorkerUnavailable as exc:
            line = f"# not runnable: {exc}"
        out += [f"# repeat {repeat}:", line]
    return "\n".join(out)


def group_text(group: list, name: str) -> str:
    """A job array's points (a plain job for one): its one script, then each point's steps."""
    if len(group) == 1:
        return point_text(group[0])
    first = group[0]
    head = [f"# ==== one job array of {len(group)} points, {first.name} .. {group[-1].name} "
            "(one sbatch; each point its own array task, its own job id, requeue and cancel)",
            f"# sbatch script (submitit writes it to {job.submitit_folder(first)}/<job>_submission.sh):",
            job.sbatch_script(first, array=len(group), job_name=name).rstrip("\n")]
    return "\n".join(head + [point_text(p, script=False) for p in group])
