"""The framework registry: each framework declares one `Adapter` in its package's
__init__.py (frameworks/<name>/__init__.py: `ADAPTER = Adapter(..., package=__name__)`),
and every side reads it here (`get`, `names`): what a framework runs and how, its facts
in one place. The harness reads its benches (train, input, comm, checkpoint) and the
session of each, its out-of-memory rule, its data=files loaders; the capability check its
precision rules; profile=true its tracer; the planner its modes and what layouts and
checkpoints it supports, and the models it trains (`frameworks_of`); the report's plots its
colour (`colour`); `launch doctor` the name its module imports by and, with the
worker's first check, the oldest releases it supports (contract/versions.py).

An adapter names its code by lazy references, "module:attribute" as entry points do
(".worker:JaxSession": relative to the framework's package), so that reading an adapter
imports no framework: a framework that cannot import still has its adapter, and its rank a
record that says why. Standard library and contract/ only, nothing of frameworks/common:
this runs in every framework's Python, and on the submitting side in the suite's.
"""
import importlib
import os
import pkgutil
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from contract import models
from contract.modes import Modes as Modes  # re-exported: what an adapter declares
from contract.statuses import Unsupported
from contract.versions import FP16 as FP16, RANKS as RANKS, TORCHTITAN as TORCHTITAN  # re-exported
from contract.versions import Release as Release  # re-exported

ANY = "any"  # a Precision key: every AMP dtype


def resolve(ref: object, package: Optional[str] = None) -> Any:
    """What a lazy reference names ("module:Name.attr", the module relative to `package`
    where it starts with a dot); anything else is taken as the object itself."""
    if not isinstance(ref, str):
        return ref
    module, _, path = ref.partition(":")
    obj: Any = importlib.import_module(module, package)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Bench:
    """One bench of a framework: `session(spec, dist) -> Session` (frameworks/common/session.py),
    and the session of data=files where the bench also trains from files (None: the session
    reads them itself, or the bench has no such mode)."""
    session: object
    files: object = None


@dataclass(frozen=True)
class Precision:
    """Where the framework cannot run AMP, each with the one line its `unsupported` record
    says; frameworks/common/capability.py applies them after the rule every framework
    shares (a GPU's compute capability). Keys are AMP dtypes, or ANY."""
    gpu: Mapping[str, str] = field(default_factory=dict)   # on a GPU: dtype -> why not
    cpu: Mapping[str, str] = field(default_factory=dict)   # on a CPU: dtype (or ANY) -> why not
    cpu_eager: Optional[str] = None  # why AMP on a CPU needs compile=true (None: it does not)
    onednn_bf16: bool = False        # its CPU AMP is oneDNN's bf16 whatever amp_dtype says,
                                     # which needs AVX512-BF16 or AMX


@dataclass(frozen=True)
class Adapter:
    name: str
    benches: Mapping[str, Bench]
    oom: object = None               # is_oom(exc) -> bool; None: the harness's (MemoryError)
    data_backends: tuple[str, ...] = ()  # data=files loaders (data.backend), the default first
    import_name: Optional[str] = None  # the module it imports as (None: its name)
    releases: tuple[Release, ...] = ()  # Release(...): the oldest release of the framework and of
                                     # what its worker imports beside it, and why
    modes: Modes = Modes()           # compile=false, compile=true, and auto's choice
    precision: Precision = Precision()  # where its AMP cannot run, and why
    tracer: object = None            # profile=true: trace(folder, steps, session) -> dict
    layouts: bool = False            # splits a model beyond data parallelism (tp, pp, fsdp,
                                     # cp, ep: contract/parallel.py)
    models: tuple[str, ...] = ()     # the models it trains (contract/models/<name>.py):
                                     # `frameworks_of` answers the planner and the tests
    colour: Optional[str] = None     # its colour in the report's plots (None: PALETTE's, by name)
    preload: tuple[str, ...] = ()    # third-party modules a local CPU rank may inherit, imported
                                     # once by a forkserver (frameworks/common/forkserver.py)
    package: Optional[str] = field(default=None, repr=False)  # of relative references

    def __post_init__(self) -> None:
        if self.import_name is None:
            object.__setattr__(self, "import_name", self.name)

    def bench(self, name: str) -> Bench:
        """The bench `name`, or Unsupported where the framework has none."""
        try:
            return self.benches[name]
        except KeyError:
            raise Unsupported(f"bench={name} is not implemented for {self.name} yet") from None

    @property
    def checkpoints(self) -> bool:
        """Whether it saves and loads checkpoints: its bench=checkpoint, and training with
        them (checkpoint.every), both on the same code (docs/checkpoint.md)."""
        return "checkpoint" in self.benches

    def load(self, ref: object) -> Any:
        """What one of this adapter's references names (imports its module)."""
        return resolve(ref, self.package)

    def oom_rule(self) -> Any:
        """The framework's is_oom(exc) (imports its module), or None where it declares none."""
        return None if self.oom is None else self.load(self.oom)


# The colours of frameworks that declare none (matplotlib's tab10 but the declared ones' hues)
PALETTE = ("#1f77b4", "#bcbd22", "#e377c2", "#7f7f7f", "#17becf", "#9467bd")


def get(name: str) -> Adapter:
    """The adapter framework `name` declares (frameworks/<name>/__init__.py); importing it
    imports no framework. ModuleNotFoundError where the suite has no such framework."""
    adapter: Adapter = importlib.import_module(f"{__package__}.{name}").ADAPTER
    return adapter


def names() -> list[str]:
    """Every framework with an adapter: the packages of frameworks/ but common/, sorted."""
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted(m.name for m in pkgutil.iter_modules([here]) if m.ispkg and m.name != "common")


def which(fact: str) -> list[str]:
    """The frameworks whose adapters have `fact` (an attribute, true), as refusals name them."""
    return [name for name in names() if getattr(get(name), fact)]


def frameworks_of(model: str) -> list[str]:
    """The frameworks that train `model` (their adapters' `models`), sorted."""
    return [name for name in names() if model in get(name).models]


def check_model(model: str, framework: str) -> None:
    """The planner's question: is there such a model, and does `framework` train it?
    UnknownModel or ValueError, in one line."""
    models.get(model)
    trains = frameworks_of(model)
    if framework not in trains:
        raise ValueError(f"model={model} is built for framework={', '.join(trains)} only, "
                         f"not {framework}")


def colour(adapter: Adapter) -> str:
    """The adapter's colour, or one of PALETTE's chosen by its name (the same in every run:
    crc32, not Python's salted hash)."""
    return adapter.colour or PALETTE[zlib.crc32(adapter.name.encode()) % len(PALETTE)]
