"""A sweep point, typed: what `launchers/plan/points.py` makes once from Hydra's config,
checked, and what every launcher, driver and health step reads after, as attributes.

Each field is declared once here, with its type and its rule (`setting`: least value,
bounds, choices; contract/typed.py): the planner checks the config's values against these
declarations before it makes anything of them (typed.check), one line per mistake.

On disk it is SWEEP/points/<point>/point.json (contract/paths.py), whose format does not
change: `Point.from_dict` reads the files of earlier suites (a key they lack takes its
default) and `as_dict` writes the same keys (`name` is the file's "point"). Standard
library only.
"""
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from . import paths
from .frozen import Settings
from .parallel import Layout
from .typed import build, plain, setting


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
    time_min: Optional[int] = setting(None, minimum=1)  # the allocation's time limit; None: from the repeats
    step_overhead_s: float = 60      # per repeat, besides timeout_s: start, imports, rendezvous
    signal_delay_s: int = setting(120, minimum=0)  # the requeue signal's lead before the time limit
    max_requeues: int = setting(3, minimum=0)
    failure_grace_s: Optional[float] = None  # after a rank fails, the others' time before
                                             # the stop; None: the backend's (30 s Slurm, 5 s here)
    forkserver: bool = True          # local: a CPU point's PyTorch ranks forked from one interpreter
                                     # that imported torch (launchers/backends/forked.py); false:
                                     # each rank a new interpreter, as srun starts them


CONTAINER_RUNTIMES = ("pyxis", "apptainer", "charliecloud")


@dataclass(frozen=True)
class Cluster:
    """The site (conf/cluster/<site>.yaml; docs/slurm.md)."""
    name: str = "local"
    gpus: bool = False               # the nodes have GPUs: --gpus-per-node
    max_gpus_per_node: Optional[int] = setting(None, minimum=1)
    partition: Optional[str] = None
    account: Optional[str] = None
    qos: Optional[str] = None
    constraint: Optional[str] = None
    exclusive: bool = False
    cpus_per_task: Optional[int] = setting(None, minimum=1)
    mem: Optional[str] = None
    max_time_min: Optional[int] = setting(None, minimum=1)
    sbatch_args: Settings = Settings()
    srun_args: tuple[str, ...] = ()
    container_runtime: str = setting("pyxis", choices=CONTAINER_RUNTIMES)  # launchers/backends/containers.py
    containers: Settings = Settings()   # framework -> image
    container_mounts: tuple[str, ...] = ()
    container_python: str = "python"
    env: Settings = Settings()          # every rank's environment
    store: Settings = Settings()        # {url}: the results store the sweep's report adds to
    secret_keys: tuple[str, ...] = ()             # the site's own secret keys (contract/secrets.py)


@dataclass(frozen=True)
class Expect:
    """The site's own figures (health.expect): below one is sick, whatever the other nodes
    do (launchers/health/expected.py). None: not judged."""
    link_gbytes_s: Optional[float] = setting(None, above=0)  # each link between nodes, GB/s
    matmul_tflops: Optional[float] = setting(None, above=0)  # each device's fp32 matrix multiply, TFLOP/s
    ib_rate_gbits: Optional[float] = setting(None, above=0)  # each node's slowest InfiniBand port, Gb/s
    gpus_per_node: Optional[int] = setting(None, minimum=1)  # GPUs each node has (NVML, or the node's gres)
    # the network NCCL must use between nodes: IB, RoCE, Socket, plugin, or a plugin's network
    # name (contract/nccl_net.py: meets)
    nccl_transport: Optional[str] = None


@dataclass(frozen=True)
class Health:
    """The checked health settings (launchers/health/settings.py; docs/health.md)."""
    checks: tuple[str, ...] = ()               # names: healthchecks/nodechecks.py's (launchers/health/settings.py)
    min_fraction: float = setting(0.8, above=0, at_most=1)
    retries: int = setting(2, minimum=0)
    device_model: Optional[str] = None
    cpu_governor: Optional[str] = "performance"
    matmul_n: Optional[int] = setting(None, minimum=1)
    matmul_s: float = setting(0.5, above=0)
    link_mb: float = setting(64, above=0)
    link_iters: int = setting(3, minimum=1)
    link_cap_s: float = setting(2, above=0)  # a link's transfer moves at most what it can in this time
    site_checks: tuple[str, ...] = ()          # script paths (launchers/health/settings.py)
    timeout_s: float = setting(300, above=0)
    expect: Expect = Expect()


@dataclass(frozen=True)
class Point:
    name: str                        # the folder's name, "point" in the file
    dir: str
    framework: Framework
    model: Settings                  # the resolved model: its size's keys folded in
    bench: str = "train"
    bench_options: Settings = Settings()
    num: int = setting(0, minimum=0)
    parallel: Optional[Layout] = None  # the grid and batch sizes (contract/parallel.py)
    notes: tuple[str, ...] = ()                # what was changed to fit the layout, said at submission
    case: Optional[str] = None       # a published case's name (gpt_case=...)
    precision: str = "fp32"
    amp_dtype: Optional[str] = setting(None, choices=("bf16", "fp16"), key="precision.amp_dtype")
    compile: bool = False            # resolved: compile=auto is the framework's own choice
    compile_setting: object = None   # as given: "auto", true or false
    mode: Optional[str] = None       # eager, jit, graph, ...: its framework's Modes (None: a
                                     # point written before modes; run_spec names it)
    batch_size: int = setting(1, minimum=1)  # per device and forward
    nodes: int = setting(1, minimum=1)
    gpus_per_node: int = setting(1, minimum=1)
    world_size: int = setting(1, minimum=1)
    warmup_steps: int = setting(0, minimum=0)
    measure_steps: int = setting(1, minimum=1)
    repeats: int = setting(1, minimum=1)
    device: str = setting("auto", choices=("auto", "cpu", "cuda"))
    seed: int = 0
    timeout_s: int = setting(1800, minimum=1)  # one repeat, all ranks
    rendezvous_timeout_s: float = setting(300, above=0)
    memory_limit_mb: Optional[int] = setting(None, minimum=1)
    preflight: bool = False
    health: Health = Health()
    search: Optional[Settings] = None  # whole: launchers/plan/search.py; run: driver/search.py
    launcher: Launcher = Launcher("local")
    cluster: Cluster = Cluster()
    overrides: tuple[str, ...] = ()
    config: Settings = Settings()    # the whole resolved config, as composed
    container: Optional[Settings] = None  # the image as submitted: runtime, image, digest
                                          # (launchers/backends/containers.py; docs/containers.md)
    suite_commit: Optional[str] = None
    created_unix: Optional[float] = None
    schema: str = field(default=paths.POINT_SCHEMA, repr=False)
    version: int = field(default=paths.SCHEMA_VERSION, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], unknown: str = "drop") -> "Point":
        """A point from its file's mapping (or from launchers/plan/points.py's)."""
        d = dict(d)
        d["name"] = d.pop("point")
        if isinstance(d.get("parallel"), dict):
            d["parallel"] = Layout.of(d["parallel"])
        if d.get("compile_setting") is None:  # written before compile=auto: it was explicit
            d["compile_setting"] = d.get("compile", False)
        return build(cls, d, "point", unknown)

    def as_dict(self) -> dict[str, Any]:
        d = plain(self)
        d["point"] = d.pop("name")
        return {"schema": d.pop("schema"), "version": d.pop("version"), "point": d.pop("point"), **d}

    def replace(self, **changes: Any) -> "Point":
        return replace(self, **changes)

    @property
    def container_image(self) -> Optional[str]:
        """The framework's image: framework.container, else the site's containers.<framework>."""
        return self.framework.container or self.cluster.containers.get(self.framework.name)

    @property
    def repeat_dirs(self) -> list[str]:
        return [paths.repeat_dir(self.dir, r) for r in range(self.repeats)]

    def repeat_dir(self, repeat: int) -> str:
        return paths.repeat_dir(self.dir, repeat)

    @property
    def sweep(self) -> str:
        return paths.sweep_of(self.dir)
