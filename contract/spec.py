"""What a rank reads, typed: the run spec of one repeat (repeat-NN/spec.json, written by the
driver for the worker) and the spec of one health step (health/attempt-NN/spec.json, for
healthchecks/rank.py). Both are frozen; the files keep their format (`from_dict` reads the
files of earlier suites, `as_dict` writes the same keys). Standard library only: this runs
in every framework's Python.
"""
import json
from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Any, Optional, overload

from . import paths
from .frozen import Settings
from .parallel import Layout
from .typed import build, plain

REQUIRED = ("point", "repeat", "framework", "model", "precision", "batch_size",
            "warmup_steps", "measure_steps", "record_dir")


@dataclass(frozen=True)
class RunSpec:
    point: str                       # the point's name
    repeat: int
    framework: str                   # the framework's name
    model: Settings                  # the resolved model (its size's keys folded in)
    precision: str
    batch_size: int                  # per device and forward (a layout's micro-batch)
    warmup_steps: int
    measure_steps: int
    record_dir: str                  # where the rank writes its record
    bench: str = "train"
    bench_options: Settings = Settings()
    amp_dtype: Optional[str] = None
    compile: bool = False
    compile_setting: object = None
    mode: Optional[str] = None       # eager, jit, graph, ...: the point's (contract/point.py)
    device: str = "auto"
    seed: int = 0
    rendezvous_timeout_s: float = 300
    options: Settings = Settings()   # the framework's own options
    memory_limit_mb: Optional[int] = None
    parallel: Optional[Layout] = None
    suite_commit: Optional[str] = None
    config: Settings = Settings()    # the point's whole resolved config
    container: Optional[Settings] = None  # the image the ranks run in: runtime, image, digest
    schema: str = field(default=paths.SPEC_SCHEMA, repr=False)
    version: int = field(default=paths.SCHEMA_VERSION, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunSpec":
        missing = [k for k in REQUIRED if k not in d]
        if missing:
            raise ValueError(f"spec lacks {', '.join(missing)}")
        d = dict(d)
        if isinstance(d.get("parallel"), dict):
            d["parallel"] = Layout.of(d["parallel"])
        if d.get("compile_setting") is None:
            d["compile_setting"] = d.get("compile", False)
        return build(cls, d, "spec", unknown="drop")

    def as_dict(self) -> dict[str, Any]:
        return plain(self)

    def replace(self, **changes: Any) -> "RunSpec":
        return replace(self, **changes)

    @property
    def data(self) -> Settings:
        """The point's data settings (conf/data/: source, path, workers, backend)."""
        return self.config.get("data") or Settings()


@dataclass(frozen=True)
class HealthSpec:
    """One health step's spec: the shape of the allocation and the checks' settings."""
    record_dir: str
    nodes: int
    gpus_per_node: int
    settings: Settings               # the point's Health, its gpus_per_node and NCCL_* settings
    point: Optional[str] = None
    device: str = "auto"
    link_timeout_s: float = 285
    schema: str = field(default=paths.HEALTH_SPEC_SCHEMA, repr=False)
    version: int = field(default=paths.SCHEMA_VERSION, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HealthSpec":
        return build(cls, d, "health spec", unknown="drop")

    def as_dict(self) -> dict[str, Any]:
        return plain(self)


@overload
def read(path: str) -> RunSpec: ...
@overload
def read(path: str, cls: type[HealthSpec]) -> HealthSpec: ...


def read(path: str, cls: type[RunSpec] | type[HealthSpec] = RunSpec) -> RunSpec | HealthSpec:
    """A spec file, checked: its schema and version, then its keys."""
    with open(path) as f:
        d = json.load(f)
    want = cls.__dataclass_fields__["schema"].default
    if not isinstance(d, dict) or d.get("schema") != want or d.get("version") != paths.SCHEMA_VERSION:
        raise ValueError(f"{path}: not a {want} v{paths.SCHEMA_VERSION} file")
    try:
        return cls.from_dict(d)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
