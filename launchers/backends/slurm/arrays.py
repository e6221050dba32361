"""A sweep's Slurm points as job arrays: grouped by allocation shape (one sbatch each, at most
MaxArraySize tasks), each point written before it is queued, and a point whose earlier job
is still pending or running left to it."""
import json
import os

from contract import paths
from launchers.backends import secret_env
from launchers.backends.slurm import job, nodes, sacct
from launchers import sweepdir
from launchers.driver import preflight


def shapes(pts: list) -> list:
    """The points grouped by allocation shape: the same sbatch options but for the job name
    (and the same submitit folder, requeue limit and secrets' values, which ride in the
    sbatch's one environment: secret_env.py), in sweep order. Each group can be one job
    array."""
    groups: dict = {}
    for p in pts:
        params = job.executor_parameters(p)
        del params["job_name"]
        key = json.dumps([job.submitit_folder(p), params, p.launcher.max_requeues,
                          secret_env.hidden(p)], sort_keys=True, default=str)
        groups.setdefault(key, []).append(p)
    return list(groups.values())


def name(group: list) -> str:
    """The job name of a group's sbatch: the point's, or the sweep's and the shape."""
    first = group[0]
    if len(group) == 1:
        return f"dlbench-{first.name}"
    return f"dlbench-{os.path.basename(first.sweep)}-{first.nodes}x{first.gpus_per_node}"


def to_queue(pts: list) -> list:
    """[(point, its previous slurm.json or None, whether its folder is new)] of the points
    to submit, with their point.json written. A point whose earlier job is still pending or
    running is left to it (its driver reads this point.json): one squeue call for them all."""
    previous = {p.name: job.read_slurm_json(p.dir) for p in pts}
    ids = [prev["job_id"] for prev in previous.values() if prev]
    live = sacct.squeue_states(ids) if ids else {}
    out = []
    for point in pts:
        prev = previous[point.name]
        if prev and live.get(str(prev["job_id"])) in ("PENDING", "RUNNING"):
            print(f"{point.name}: already queued as Slurm job {prev['job_id']}")
            continue
        fresh = not os.path.exists(os.path.join(point.dir, paths.POINT_FILE))
        sweepdir.write_point(point)
        preflight.new_round(point.dir)  # exclusions of an earlier submission do not carry over
        if sweepdir.recorded(point) == point.repeats:
            print(f"{point.name}: every repeat is recorded; nothing to submit")
            continue
        out.append((point, prev, fresh))
    return out


def max_size() -> int:
    """How many tasks one job array may have (the controller's MaxArraySize)."""
    return nodes.slurm_config(keys=("MaxArraySize",)).get("MaxArraySize") or 1001
