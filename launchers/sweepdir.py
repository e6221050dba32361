"""A sweep folder's files as launchers/ writes and reads them (the layout itself is
contract/paths.py): a point's point.json, how many of its repeats are recorded, a step's
spec.json, a step's rank records. The planner's points are written by the backends at
submission and read back by the driver in the allocation; both import this, not each other.

    SWEEP/points/000-pytorch-resnet50-fp32-1x2-bs8/point.json
    SWEEP/points/000-.../repeat-00/{spec.json, rank-00000.json, ..., run.json}
"""
import json
import os

from contract import paths, records, secrets, statuses
from contract.point import Point


def write_point(point: Point) -> None:
    os.makedirs(point.dir, exist_ok=True)
    records.write_json_atomic(os.path.join(point.dir, paths.POINT_FILE), point.as_dict())


# What Hydra writes into a sweep's folder before the suite checks a point (-m: the sweep's
# overrides and config); a refused sweep's folder holding only this is removed (remove_unused).
HYDRA_FILES = ("multirun.yaml",)


def made_since(folder: str, since: float) -> bool:
    """Whether `folder` was made (or last changed) at `since` or after: by this command."""
    try:
        return os.stat(folder).st_ctime >= since
    except OSError:
        return False


def remove_unused(folder: str) -> None:
    """A sweep's folder this command made, refused before anything ran: removed, Hydra's own
    files with it, where nothing else was written into it (a folder with results is kept)."""
    try:
        names = os.listdir(folder)
        if set(names) - set(HYDRA_FILES):
            return
        for name in names:
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    except OSError:  # in use, or gone: it stays as it is
        pass


def as_written(point: Point) -> Point:
    """The point as its point.json holds it, its secrets masked (contract/secrets.py): what a
    pickled driver may carry (the values reach its ranks by the environment: secret_env.py)."""
    return Point.from_dict(secrets.masked(point.as_dict()))


def read_point(point_dir) -> Point:
    with open(os.path.join(point_dir, paths.POINT_FILE)) as f:
        return Point.from_dict(json.load(f))


def read_run(rdir: str):
    """A repeat's run.json, or None where it has none yet; one that cannot be read counts as
    recorded (its status `corrupt`: the analysis says so), never as a repeat to run again."""
    path = os.path.join(rdir, paths.RUN_FILE)
    if not os.path.exists(path):
        return None
    return records.read_json(path) or {"status": "corrupt", "error": f"{path} cannot be read"}


def recorded(point: Point) -> int:
    """How many of the point's repeats are recorded for good (statuses.final: a cancelled
    repeat runs again)."""
    return sum(run is not None and statuses.final(run)
               for run in map(read_run, point.repeat_dirs))


def write_spec(folder: str, spec) -> str:
    """A step's spec.json (a RunSpec or a HealthSpec) in `folder`, whole -> its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, paths.SPEC_FILE)
    records.write_json_atomic(path, spec.as_dict())
    return path


def read_rank_records(folder: str, world_size: int) -> dict:
    """rank -> record of a step's folder, None where a rank wrote none (or one that cannot
    be read)."""
    out = {}
    for rank in range(world_size):
        try:
            with open(os.path.join(folder, paths.rank_record_name(rank))) as f:
                out[rank] = json.load(f)
        except (OSError, ValueError):
            out[rank] = None
    return out
