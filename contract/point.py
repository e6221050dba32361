"""A sweep point, typed: what `launchers/plan/points.py` makes once from Hydra's config,
checked, and what every launcher, driver and health step reads after, as attributes.

On disk it is SWEEP/points/<point>/point.json (contract/paths.py), whose format does not
change: `Point.from_dict` reads the files of earlier suites (a key they lack takes its
default) and `as_dict` writes the same keys (`name` is the file's "point"). Standard
library only.
"""
from dataclasses import dataclass, field, replace
from typing import Optional

from . import paths
from .frozen import Settings
from .parallel import Layout
from .typed import build, plain


@dataclass(frozen=True)
class Framework:
    name: str
    python: Optional[str] = None     # its interpreter, from the suite's root (.venvs/<name>/...)
    container: Optional[str] = None  # its image, where the point names one
    options: Settings = Settings()   # the framework's own options (conf/framework/<name>.yaml)


@dataclass(frozen=True)
class Launcher:
    name: str                        # local or slurm: launcher=auto resolved
    auto: Optional[str] = None       # why launcher=auto chose it
    time_min: Optional[int] = None   # the allocation's time limit; None: from the repeats
    step_overhead_s: float = 60      # per repeat, besides timeout_s: start, imports, rendezvous
    signal_delay_s: int = 120        # the requeue signal's lead before the time limit
    max_requeues: int = 3
    failure_grace_s: Optional[float] = None  # after a rank fails, the others' time before
                                             # the stop; None: the backend's (30 s Slurm, 5 s here)


@dataclass(frozen=True)
class Cluster:
    """The site (conf/cluster/<site>.yaml; docs/slurm.md)."""
    name: str = "local"
    gpus: bool = False               # the nodes have GPUs: --gpus-per-node
    max_gpus_per_node: Optional[int] = None
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    constraint: Optional[str] = None
    exclusive: bool = False
    cpus_per_task: Optional[int] = None
    mem: Optional[str] = None
    max_time_min: Optional[int] = None
    sbatch_args: Settings = Settings()
    srun_args: tuple = ()
    container_runtime: str = "pyxis"    # pyxis, apptainer or charliecloud (launchers/backends/containers.py)
    containers: Settings = Settings()   # framework -> image
    container_mounts: tuple = ()
    container_python: str = "python"
    env: Settings = Settings()          # every rank's environment
    store: Settings = Settings()        # {url}: the results store the sweep's report adds to


@dataclass(frozen=True)
class Expect:
    """The site's own figures (health.expect): below one is sick, whatever the other nodes
    do (launchers/health/expected.py). None: not judged."""
    link_gbytes_s: Optional[float] = None   # each link between nodes, GB/s
    matmul_tflops: Optional[float] = None   # each device's fp32 matrix multiply, TFLOP/s
    ib_rate_gbits: Optional[float] = None   # each node's slowest InfiniBand port, Gb/s
    gpus_per_node: Optional[int] = None     # GPUs each node has (NVML, or the node's gres)


@dataclass(frozen=True)
class Health:
    """The checked health settings (launchers/health/settings.py; docs/health.md)."""
    checks: tuple = ()
    min_fraction: float = 0.8
    retries: int = 2
    device_model: Optional[str] = None
    cpu_governor: Optional[str] = "performance"
    matmul_n: Optional[int] = None
    matmul_s: float = 0.5
    link_mb: float = 64
    link_iters: int = 3
    link_cap_s: float = 2            # a link's transfer moves at most what it can in this time
    site_checks: tuple = ()
    timeout_s: float = 300
    expect: Expect = Expect()


@dataclass(frozen=True)
class Point:
    name: str                        # the folder's name, "point" in the file
    dir: str
    framework: Framework
    model: Settings                  # the resolved model: its size's keys folded in
    bench: str = "train"
    bench_options: Settings = Settings()
    num: int = 0
    parallel: Optional[Layout] = None  # the grid and batch sizes (contract/parallel.py)
    notes: tuple = ()                # what was changed to fit the layout, said at submission
    case: Optional[str] = None       # a published case's name (gpt_case=...)
    precision: str = "fp32"
    amp_dtype: Optional[str] = None
    compile: bool = False            # resolved: compile=auto is the framework's own choice
    compile_setting: object = None   # as given: "auto", true or false
    mode: Optional[str] = None       # eager, jit, graph, ...: its framework's Modes (None: a
                                     # point written before modes; run_spec names it)
    batch_size: int = 1              # per device and forward
    nodes: int = 1
    gpus_per_node: int = 1
    world_size: int = 1
    warmup_steps: int = 0
    measure_steps: int = 1
    repeats: int = 1
    device: str = "auto"
    seed: int = 0
    timeout_s: float = 1800
    rendezvous_timeout_s: float = 300
    memory_limit_mb: Optional[int] = None
    preflight: bool = False
    health: Health = Health()
    search: Optional[Settings] = None  # launchers/plan/search.py
    launcher: Launcher = Launcher("local")
    cluster: Cluster = Cluster()
    overrides: tuple = ()
    config: Settings = Settings()    # the whole resolved config, as composed
    container: Optional[Settings] = None  # the image as submitted: runtime, image, digest
                                          # (launchers/backends/containers.py; docs/containers.md)
    suite_commit: Optional[str] = None
    created_unix: Optional[float] = None
    schema: str = field(default=paths.POINT_SCHEMA, repr=False)
    version: int = field(default=paths.SCHEMA_VERSION, repr=False)

    @classmethod
    def from_dict(cls, d: dict, unknown: str = "drop") -> "Point":
        """A point from its file's mapping (or from launchers/plan/points.py's)."""
        d = dict(d)
        d["name"] = d.pop("point")
        if isinstance(d.get("parallel"), dict):
            d["parallel"] = Layout.of(d["parallel"])
        if d.get("compile_setting") is None:  # written before compile=auto: it was explicit
            d["compile_setting"] = d.get("compile", False)
        return build(cls, d, "point", unknown)

    def as_dict(self) -> dict:
        d = plain(self)
        d["point"] = d.pop("name")
        return {"schema": d.pop("schema"), "version": d.pop("version"), "point": d.pop("point"), **d}

    def replace(self, **changes) -> "Point":
        return replace(self, **changes)

    @property
    def container_image(self) -> Optional[str]:
        """The framework's image: framework.container, else the site's containers.<framework>."""
        return self.framework.container or self.cluster.containers.get(self.framework.name)

    @property
    def repeat_dirs(self) -> list:
        return [paths.repeat_dir(self.dir, r) for r in range(self.repeats)]

    def repeat_dir(self, repeat: int) -> str:
        return paths.repeat_dir(self.dir, repeat)

    @property
    def sweep(self) -> str:
        return paths.sweep_of(self.dir)
