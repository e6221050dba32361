"""One spec per model: what the planner and the analysis must know of it, in one module each
(contract/models/<name>.py declaring `SPEC = ModelSpec(...)`), read with the standard library
only, so that launchers, analysis and every framework's worker read the same facts
(torchtitan's TrainSpec is the model). `get(name)` finds a model by its module: adding a model
adds a file here (docs/architecture.md, "How to add a model") and edits no table.

A spec says where PyTorch's session of it is (which frameworks train it is theirs to say: each
adapter's `models`, asked as frameworks.registry.frameworks_of, since contract/ imports no
framework); its
layouts and relations (the parallel axes it is built for, what tp must divide); its FLOP count
of one sample (a function of the point's model settings, by contract/flops.py's one convention,
tested against hand figures in tests/unit/test_flops.py) and, where its published figures count
otherwise, that count too; whether it is a language model or a mixture of experts; its report
section and the `model` of its published rows; the regression gate's metric and keys; what a
batch holds and whether data=files reads it; whether DCP checkpoints it.
"""
import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable, Optional

# What a batch holds (frameworks/common/synthetic.py, datafiles.py read it)
IMAGES, MASKED_TOKENS, TOKENS, CLICKS = "images", "masked_tokens", "tokens", "clicks"
AXES = ("tp", "pp", "fsdp", "cp", "ep", "sp")   # the parallel axes beyond plain data parallelism
Model = dict[str, Any]   # a model's settings resolved to one flat dict (launchers/plan/points.resolve_model)


class UnknownModel(ValueError):
    """A name that no module of contract/models/ declares."""


@dataclass(frozen=True)
class ModelSpec:
    name: str                              # its module's name, and conf/model/<name>.yaml's
    pytorch_session: Optional[str] = None  # PyTorch's session of it, "module:attr" (imported where used)
    flops: Optional[Callable[[Model], int]] = None  # training FLOPs of one sample (image, sequence) of the settings
    flops_keys: tuple[str, ...] = ()       # the settings the count needs: no count where one is unset
    language_model: bool = False           # a sample is a sequence: tokens/s = samples/s x seq_len
    experts: bool = False                  # a mixture of experts: routed experts split over ep
    layouts: tuple[str, ...] = ()          # AXES it is built for; none: plain data parallelism only
    tp_divides: tuple[str, ...] = ()       # its settings tensor parallelism splits whole (heads)
    report: Optional[str] = None           # its report section (analysis/sections/special.py)
    tables: bool = True                    # also in the report's per-model tables
    published: tuple[str, ...] = ()        # the `model` of published layout rows that are its
    metric: str = "throughput"             # the regression gate's default (analysis/gate/)
    compare_keys: tuple[str, ...] = ()     # settings that tell its points apart in a reference
    inputs: str = TOKENS                   # what a batch holds: IMAGES, MASKED_TOKENS, TOKENS, CLICKS
    files: bool = False                    # data=files reads it (frameworks/common/datafiles.py)
    checkpoint: bool = False               # DCP checkpoints it whole (bench=checkpoint, checkpoint.every)
    published_flops: Optional[Callable[[Model], int]] = None   # its FLOPs of one sample as its published figures
                                           # count them, where not as contract/flops.py

    def __post_init__(self) -> None:
        unknown = sorted(set(self.layouts) - set(AXES))
        if unknown:
            raise ValueError(f"model {self.name}: unknown parallel axes {', '.join(unknown)} "
                             f"(valid: {', '.join(AXES)})")

    def flops_per_sample(self, model: Model) -> Optional[int]:
        """Training FLOPs of one sample of `model` (a point's settings), None where the model
        has no count or a setting it needs is unset."""
        if self.flops is None or not all(model.get(k) for k in self.flops_keys):
            return None
        return self.flops(model)

    def published_flops_per_sample(self, model: Model) -> Optional[int]:
        """Its FLOPs of one sample in the convention of its published figures (`published_flops`),
        None where they count as the suite does or a setting is unset."""
        if self.published_flops is None or self.flops_per_sample(model) is None:
            return None
        return self.published_flops(model)


@functools.lru_cache(maxsize=None)
def names() -> tuple[str, ...]:
    """Every model's name (a module of this package), sorted."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.ispkg))


def get(name: str) -> ModelSpec:
    """The spec contract/models/<name>.py declares; UnknownModel (one line) where none does."""
    if name not in names():
        raise UnknownModel(f"unknown model {name!r}: no contract/models/{name}.py declares it "
                           f"(known: {', '.join(names())})")
    spec: ModelSpec = importlib.import_module(f"{__name__}.{name}").SPEC
    return spec


def find(name: object) -> Optional[ModelSpec]:
    """The spec of `name`, or None where it is not a model (a record's unknown name)."""
    return get(name) if isinstance(name, str) and name in names() else None


def named(where: Callable[[ModelSpec], object]) -> tuple[str, ...]:
    """The names of the models whose spec `where` holds for, sorted."""
    return tuple(n for n in names() if where(get(n)))


def published(key: object) -> Optional[ModelSpec]:
    """The model of a published row's `model` (analysis/published/), or None."""
    return next((get(n) for n in names() if key in get(n).published), None)
