"""One `srun` job step on Slurm (a repeat's, or a health step's): its argument list,
environment, port, time limit, and how its ranks are signalled (docs/slurm.md, "How a repeat
runs").

Both sides of launcher=slurm use it: the submission and the dry run, and the launcher object
in the allocation, which runs the steps (launchers/backends/slurm/launcher.py).
"""
import dataclasses
import math
import os
import subprocess

from contract import paths, secrets
from launchers.backends import containers, ports, secret_env, worker
from launchers.health import step as health_step
from launchers.suite import ROOT

# Per-rank variables a worker prefers over Slurm's (frameworks/common/distenv.py): a stale
# RANK in the driver's environment would give every task the same rank.
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# Per-step / per-task Slurm variables: srun sets its own; an inherited one would mislead.
STEP_PREFIXES = ("SLURM_STEP", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASK_PID",
                 "SLURM_GTIDS", "SLURM_CPU_BIND", "SLURM_SRUN_COMM", "SLURM_LAUNCH_NODE_IPADDR")


def time_limit_min(point) -> int:
    """The allocation's time limit: launcher.time_min, else enough for every repeat
    (timeout_s + step_overhead_s each, plus the requeue signal's lead), capped at the
    cluster's max_time_min. A point that needs more is requeued by its checkpoint."""
    ln, cap = point.launcher, point.cluster.max_time_min
    if ln.time_min:
        return int(ln.time_min)
    need = math.ceil((point.repeats * (point.timeout_s + ln.step_overhead_s) + ln.signal_delay_s) / 60)
    return min(need, int(cap)) if cap else need


def step_time_min(point, job_min: int) -> int:
    """srun --time for one repeat: a backstop just past timeout_s (the driver's own timer
    ends the step first), never above the allocation's limit."""
    return max(1, min(math.ceil(point.timeout_s / 60) + 1, job_min))


def master_port(point, job_id, free=ports.is_free) -> int:
    """MASTER_PORT of a step (launchers/backends/ports.py, the one rule). The driver runs on the
    allocation's first node (MASTER_ADDR), so the ports it finds free are free there. The
    preferred slot comes from the job id, so concurrent jobs sharing a first node start
    apart; a port the previous repeat (or the requeued job's last run) left in TIME_WAIT
    is not free, so a free block drawn at random is taken."""
    return ports.free_block(point.world_size, preferred_slot=int(job_id), free=free)


def port_rule_text(point) -> str:
    """master_port in words, for the dry run."""
    world = point.world_size
    return (f"<block job_id % {ports.slots(world)} of world_size + 2 = {ports.span(world)} ports in "
            f"{ports.LOW}..{ports.HIGH - 1} if free, else a free one drawn at random "
            "(launchers/backends/ports.py)>")


# ---- the step ---------------------------------------------------------------------------
def worker_argv(point, spec_path: str, python: str) -> list:
    """The worker command: in the framework's container its own `python`, else the
    framework's interpreter (or ours) as on the local launcher."""
    if point.container_image:
        bare = point.replace(framework=dataclasses.replace(point.framework, python=None))
        return worker.worker_argv(bare, spec_path, point.cluster.container_python or "python")
    return worker.worker_argv(point, spec_path, python)


def srun_argv(point, rdir: str, command: list, time_min: int) -> list:
    """A job step as an argument list: one task per GPU on every node, each running
    `command` (in the framework's image where the site names one: its runtime's srun options,
    then srun_args, then the runtime's command), with --time `time_min` (the step's
    backstop: the runner ends it first).

    --kill-on-bad-exit=0 (whatever the site's KillOnBadExit): the driver ends the step
    when a rank fails, after launcher.failure_grace_s, with signals. srun's own kill of the
    step is queued by the controller for a node that does not answer and delivered when the
    node is back, where it kills the same-numbered step of the requeued job (Slurm 22.05)."""
    cl = point.cluster
    gpn = point.gpus_per_node
    argv = ["srun", f"--nodes={point.nodes}", f"--ntasks={point.world_size}",
            f"--ntasks-per-node={gpn}", "--kill-on-bad-exit=0", f"--time={time_min}",
            f"--output={os.path.join(rdir, paths.RANK_LOG_SRUN)}", f"--chdir={ROOT}"]
    if cl.cpus_per_task:
        argv.append(f"--cpus-per-task={int(cl.cpus_per_task)}")
    if cl.gpus:
        argv.append(f"--gpus-per-node={gpn}")
    image = point.container_image
    box = containers.step(point, image) if image else containers.Step()
    return argv + list(box.srun) + [str(a) for a in cl.srun_args] + list(box.wrap) + list(command)


def repeat_argv(point, spec_path: str, rdir: str, python: str, job_min: int) -> list:
    """One repeat's step: the worker on every task, --time just past timeout_s."""
    return srun_argv(point, rdir, worker_argv(point, spec_path, python),
                     step_time_min(point, job_min))


def health_argv(point, spec_path: str, hdir: str, python: str) -> list:
    """The health step's srun line: the point's shape, a rank per GPU, in the PyTorch
    framework's Python or container, --time just past health.timeout_s."""
    return srun_argv(health_step.as_pytorch(point), hdir,
                     health_step.command(point, spec_path, python),
                     math.ceil(float(point.health.timeout_s) / 60) + 1)


def step_env_additions(point, master_addr: str, port) -> dict:
    """What the driver adds to its environment for every rank of a step, as step.json and the
    dry run show it: its secrets masked (step_env gives the ranks their values)."""
    env = secrets.masked({str(k): str(v) for k, v in point.cluster.env.items()},
                         extra=point.cluster.secret_keys)
    env.update(MASTER_ADDR=str(master_addr), MASTER_PORT=str(port))
    # Ranks share the task's CPUs instead of each claiming the whole node.
    env.setdefault("OMP_NUM_THREADS", str(int(point.cluster.cpus_per_task or 1)))
    return env


def _stale(name: str) -> bool:
    return name in RANK_VARIABLES or name.startswith(STEP_PREFIXES)


def step_env(point, master_addr: str, port, base=None) -> dict:
    """The step's whole environment: the driver's own job's, minus stale per-rank and
    per-step variables, plus the additions with the secrets' values (from the driver's own
    environment: secret_env.py); PYTHONPATH leads to the suite. In an image, as its runtime
    needs it (containers.environ)."""
    additions = {**step_env_additions(point, master_addr, port), **secret_env.values(point, base)}
    env = worker.rank_environ(base, _stale, additions)
    return containers.environ(point, env) if point.container_image or point.cluster.containers else env


def scancel_steps(job_id, signal: str | None = None, timeout: float = 30) -> None:
    """Signal the job's running srun steps (not the job, not its batch shell): with
    `signal` (TERM: the ranks write their records and end; KILL), else cancel them. A
    signal to a node that does not answer fails after MessageTimeout; a cancel is queued
    until the node answers again (launchers/backends/step.py `stop`, abandon in
    step_watch.SrunRanks)."""
    try:
        out = subprocess.run(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i"],
                             capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.SubprocessError):
        return
    steps = [s for s in out.split() if s.partition(".")[2].isdigit()]
    if steps:
        try:
            subprocess.run(["scancel", *([f"--signal={signal}"] if signal else []), *steps],
                           capture_output=True, timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            pass
