"""The distributed environment a worker receives: one contract for every framework.

A rank reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
MASTER_PORT. The local launcher sets them itself; under srun only Slurm's own
variables exist per task, so each missing name falls back to its Slurm
counterpart below. MASTER_ADDR and MASTER_PORT come from the driver (it runs
once per allocation and knows the first node and the job id) through srun's
inherited environment. Standard library only: this runs in the framework's Python.
"""
import os
from dataclasses import asdict, dataclass

# Our name -> the Slurm variable srun sets per task, used when ours is absent.
SLURM_FALLBACK = {
    "RANK": "SLURM_PROCID",
    "WORLD_SIZE": "SLURM_NTASKS",
    "LOCAL_RANK": "SLURM_LOCALID",
    "LOCAL_WORLD_SIZE": "SLURM_NTASKS_PER_NODE",
}


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def node_rank(self) -> int:
        return self.rank // self.local_world_size

    def as_dict(self) -> dict:
        return asdict(self)


def _get(env, name, default=None):
    if name in env:
        return env[name]
    slurm = SLURM_FALLBACK.get(name)
    if slurm and slurm in env:
        # SLURM_NTASKS_PER_NODE may read "2(x3)" on heterogeneous layouts.
        return env[slurm].split("(")[0].split(",")[0]
    if default is None:
        raise KeyError(f"distributed environment lacks {name}")
    return default


def from_env(env=None) -> DistEnv:
    """The rank's view of the job; a single process when nothing is set."""
    env = os.environ if env is None else env
    world = int(_get(env, "WORLD_SIZE", "1"))
    dist = DistEnv(
        rank=int(_get(env, "RANK", "0")),
        world_size=world,
        local_rank=int(_get(env, "LOCAL_RANK", "0")),
        local_world_size=int(_get(env, "LOCAL_WORLD_SIZE", str(world))),
        master_addr=_get(env, "MASTER_ADDR", "127.0.0.1"),
        master_port=int(_get(env, "MASTER_PORT", "29500")),
    )
    if not (0 <= dist.rank < dist.world_size and 0 <= dist.local_rank < dist.local_world_size):
        raise ValueError(f"inconsistent distributed environment: {dist}")
    return dist
