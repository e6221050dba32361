"""How each framework trains for throughput: the rule of `compile`, the modes' vocabulary,
and `Modes`, what each adapter declares of its own (frameworks/<name>/__init__.py: `modes`).

`compile` is `auto`, `true` or `false`. `false` and `true` keep their meaning: the
framework's op-by-op (or plain graph) mode, and its compiled one. `auto`, the default,
is each framework's own recommended way to train for throughput, read from its official
benchmark or example scripts (docs/frameworks/<name>.md names each source; the table of
every framework's modes is docs/frameworks/README.md's).

The mode names are one vocabulary (NAMES): lower-case, each the framework's own name for
the way the step runs. `eager` is op-by-op dispatch from Python (MXNet calls it
`imperative`, MindSpore `pynative`); `tf.function` is TensorFlow's traced graph without
XLA; `xla` is that graph compiled by XLA (`jit_compile=True`); `jit` is `jax.jit` of the
whole step; `torch.compile`, `to_static` (paddle.jit.to_static) and `hybridize` (Gluon)
are those calls; `graph` is MindSpore's GRAPH_MODE and OneFlow's nn.Graph. An adapter that
declares no modes (a site's own) runs `eager` under auto and names its compiled mode
`compiled`.

The point (launchers/plan/points.py) resolves auto with its framework's `Modes`: it keeps
`compile` as the resolved bool, `compile_setting` as given (`"auto"`, true or false) and
`mode` (a name above); every rank record carries `mode`.

The recipe's switches every adapter reads the same way live here too: `clip_norm` (BERT's
gradient clipping by global norm, on by default) and `recipe_environment`, what each rank
record's `environment` says of them. Standard library only: this runs in the framework's
Python.
"""
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contract import models

AUTO = "auto"
SETTINGS = (AUTO, True, False)
NAMES = ("eager", "imperative", "pynative", "tf.function", "xla", "jit", "torch.compile",
         "to_static", "hybridize", "graph", "compiled")


def setting(value: object) -> str | bool:
    """The compile setting as one of "auto", True, False, or ValueError (one line).
    Booleans, and the strings auto/true/false in any case, are accepted."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("auto", "true", "false"):
        words: dict[str, str | bool] = {"auto": AUTO, "true": True, "false": False}
        return words[value.strip().lower()]
    raise ValueError(f"compile must be auto, true or false, got {value!r}")


@dataclass(frozen=True)
class Modes:
    """A framework's two modes, named in NAMES: `off` (compile=false), `on` (compile=true),
    and whether compile=auto runs `on` (`auto`). ValueError (one line) for a name outside
    the vocabulary."""
    off: str = "eager"
    on: str = "compiled"
    auto: bool = False

    def __post_init__(self) -> None:
        for name in (self.off, self.on):
            if name not in NAMES:
                raise ValueError(f"unknown mode {name!r}: a mode is one of {', '.join(NAMES)} "
                                 "(contract/modes.py)")

    def compiled(self, compile_setting: object) -> bool:
        """Whether this compile setting runs the compiled mode."""
        value = setting(compile_setting)
        return self.auto if value == AUTO else bool(value)

    def name(self, is_compiled: bool) -> str:
        """The mode's name, compiled or not."""
        return self.on if is_compiled else self.off

    @property
    def recommended(self) -> str:
        """The mode compile=auto gives."""
        return self.name(self.auto)


# --- the recipe's switches that every adapter reads the same way ------------------------

def clip_norm(model_cfg: Mapping[str, Any]) -> float | None:
    """The global-norm bound of gradient clipping, or None when it is off. BERT clips at
    1.0 by default (`model.clip_grad`, `model.clip_norm`), as the reference pretraining
    scripts do; `model.clip_grad=false` is DLPerf's "W/O clip". ResNet has no clipping."""
    if not model_cfg.get("clip_grad"):
        return None
    norm = float(model_cfg.get("clip_norm", 1.0))
    if not norm > 0:
        raise ValueError(f"model.clip_norm must be > 0, got {model_cfg.get('clip_norm')!r}")
    return norm


def recipe_environment(model_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What every rank record's `environment` says of the recipe: `clip_grad` (bool),
    `clip_norm` (the bound, or null), and for BERT (a spec whose batch holds masked tokens,
    contract/models/) `max_predictions_per_seq`, the masked positions per sequence that the MLM
    head gathers."""
    norm = clip_norm(model_cfg)
    env: dict[str, Any] = {"clip_grad": norm is not None, "clip_norm": norm}
    spec = models.find(model_cfg.get("name"))
    if spec and spec.inputs == models.MASKED_TOKENS:
        env["max_predictions_per_seq"] = int(model_cfg["max_predictions_per_seq"])
    return env
