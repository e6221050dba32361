"""One health step: the checks of every node of an allocation shaped like a point's, run by
the point's launcher object in its allocation (`launcher.start_health`: one srun step on
Slurm, processes here) and to its end by the step runner (launchers/backends/step.py), then
the verdict (launchers/health/verdict.py).

    run(point, hdir, launcher)     the driver's preflight (launchers/driver/preflight.py) and
                                   `launch health` (launchers/commands/health.py)

Each rank runs healthchecks/rank.py in the PyTorch framework's Python: the
suite's own here (it has torch), the site's PyTorch container where cluster.containers
names one (NCCL for the links on GPUs). The folder `hdir` gets the spec, the ranks'
records and logs, srun.log and the verdict (paths.HEALTH_FILE).
"""
import os
import time

from contract import paths, records, typed
from contract.frozen import Settings
from contract.point import Framework
from contract.spec import HealthSpec
from launchers import sweepdir
from launchers.backends import step, stopping
from launchers.health import verdict as health_verdict

MODULE = "healthchecks.rank"
# After one rank fails, the others' time to write their records. Not the launcher's
# failure_grace_s (30 s on Slurm), which a training step's ranks may need: a health step's
# ranks have only their record left to write, and the rest would wait for the failed one in
# the links' collectives until health.timeout_s.
GRACE_S = 10


def spec(point, hdir: str) -> HealthSpec:
    """What every rank's checks read: the point's health settings, its devices per node and
    the site's NCCL_* settings (cluster.env)."""
    nccl = {str(k): str(v) for k, v in point.cluster.env.items() if str(k).startswith("NCCL_")}
    settings = Settings(typed.plain(point.health), gpus_per_node=point.gpus_per_node, nccl_env=nccl)
    return HealthSpec(record_dir=hdir, nodes=point.nodes, gpus_per_node=point.gpus_per_node,
                      settings=settings, point=point.name, device=point.device,
                      # the links' collectives give up a little before the step does, so
                      # that ranks say why
                      link_timeout_s=max(10.0, float(point.health.timeout_s) - 15))


def as_pytorch(point):
    """The point as the health step runs it: in the PyTorch framework's Python or container."""
    return point.replace(framework=Framework("pytorch"))


def command(point, spec_path: str, python: str) -> list:
    """A rank's command; `python`, or the container's where the site names a PyTorch image."""
    if as_pytorch(point).container_image:
        python = point.cluster.container_python or "python"
    return [python, "-m", MODULE, "--spec", spec_path]


def run(point, hdir: str, launcher) -> dict:
    """The step in `launcher`'s allocation, to its end -> the verdict, written beside it."""
    spec_path = sweepdir.write_spec(hdir, spec(point, hdir))
    timeout = float(point.health.timeout_s)
    ranks = launcher.start_health(point, spec_path, hdir)
    out = step.run(ranks, timeout, GRACE_S, "the health step", launcher.log)
    why = {"timeout": f"the health step passed health.timeout_s={timeout:g}",
           "failure": f"stopped {GRACE_S} s after {out.first}",
           "cancelled": f"stopped by {stopping.received()}"}.get(out.stop or "")
    verdict = finish(point, hdir, launcher.hosts(), why, ranks.ends(), out.stopped)
    stopping.check()  # the owner was stopped: no verdict acted on
    return verdict


def finish(point, hdir: str, hosts: list, ended_by: str | None = None, rank_ends=None,
           stopped=()) -> dict:
    """Read the ranks' records, judge them (`rank_ends`: how ranks that the step saw end
    badly ended; `stopped`: the ranks the step's stop ended), write the verdict beside them."""
    recs = sweepdir.read_rank_records(hdir, point.world_size)
    verdict = health_verdict.judge(recs, hosts, point.gpus_per_node, typed.plain(point.health),
                                   ended_by, rank_ends, stopped)
    verdict.update(point=point.name, nodes_requested=point.nodes, ended_by=ended_by,
                   ended_unix=time.time())
    records.write_json_atomic(os.path.join(hdir, paths.HEALTH_FILE), verdict)
    return verdict


def read_verdict(hdir: str):
    return records.read_json(os.path.join(hdir, paths.HEALTH_FILE))
