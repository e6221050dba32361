"""How each framework trains for throughput: its execution mode, decided once, here.

`compile` is `auto`, `true` or `false`. `false` and `true` keep their meaning: the
framework's op-by-op (or plain graph) mode, and its compiled one. `auto`, the default,
is each framework's own recommended way to train for throughput, read from its official
benchmark or example scripts (docs/frameworks/<name>.md names each source):

| framework  | compile=false | compile=true  | auto          |
|------------|---------------|---------------|---------------|
| pytorch    | eager         | torch.compile | eager         |
| tensorflow | tf.function   | xla           | tf.function   |
| jax        | eager         | jit           | jit           |
| paddle     | eager         | to_static     | eager         |
| mxnet      | imperative    | hybridize     | hybridize     |
| mindspore  | pynative      | graph         | graph         |
| oneflow    | eager         | graph         | graph         |

The mode names are one vocabulary: lower-case, each the framework's own name for the
way the step runs. `eager` is op-by-op dispatch from Python (MXNet calls it
`imperative`, MindSpore `pynative`); `tf.function` is TensorFlow's traced graph without
XLA; `xla` is that graph compiled by XLA (`jit_compile=True`); `jit` is `jax.jit` of the
whole step; `torch.compile`, `to_static` (paddle.jit.to_static) and `hybridize` (Gluon)
are those calls; `graph` is MindSpore's GRAPH_MODE and OneFlow's nn.Graph. A framework
not in the table (a site's own adapter) runs `eager` under auto and names its compiled
mode `compiled`.

The point (launchers/plan/points.py) resolves auto: it keeps `compile` as the resolved bool,
`compile_setting` as given (`"auto"`, true or false) and `mode` (a name above); every
rank record carries `mode`.

The recipe's switches every adapter reads the same way live here too: `clip_norm` (BERT's
gradient clipping by global norm, on by default) and `recipe_environment`, what each rank
record's `environment` says of them. Standard library only: this runs in the framework's
Python.
"""

# framework -> (mode with compile=false, mode with compile=true, compiled under auto)
MODES = {
    "pytorch": ("eager", "torch.compile", False),
    "tensorflow": ("tf.function", "xla", False),
    "jax": ("eager", "jit", True),
    "paddle": ("eager", "to_static", False),
    "mxnet": ("imperative", "hybridize", True),
    "mindspore": ("pynative", "graph", True),
    "oneflow": ("eager", "graph", True),
}
UNKNOWN = ("eager", "compiled", False)
AUTO = "auto"
SETTINGS = (AUTO, True, False)


def setting(value):
    """The compile setting as one of "auto", True, False, or ValueError (one line).
    Booleans, and the strings auto/true/false in any case, are accepted."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("auto", "true", "false"):
        return {"auto": AUTO, "true": True, "false": False}[value.strip().lower()]
    raise ValueError(f"compile must be auto, true or false, got {value!r}")


def compiled(framework: str, compile_setting) -> bool:
    """Whether `framework` runs its compiled mode under this compile setting."""
    value = setting(compile_setting)
    if value == AUTO:
        return MODES.get(framework, UNKNOWN)[2]
    return value


def mode_name(framework: str, is_compiled: bool) -> str:
    """The short name of the mode `framework` runs when compiled or not (the table above)."""
    return MODES.get(framework, UNKNOWN)[1 if is_compiled else 0]


def recommended(framework: str) -> str:
    """The mode `compile=auto` gives `framework`."""
    return mode_name(framework, compiled(framework, AUTO))


# --- the recipe's switches that every adapter reads the same way ------------------------

def clip_norm(model_cfg: dict):
    """The global-norm bound of gradient clipping, or None when it is off. BERT clips at
    1.0 by default (`model.clip_grad`, `model.clip_norm`), as the reference pretraining
    scripts do; `model.clip_grad=false` is DLPerf's "W/O clip". ResNet has no clipping."""
    if not model_cfg.get("clip_grad"):
        return None
    norm = float(model_cfg.get("clip_norm", 1.0))
    if not norm > 0:
        raise ValueError(f"model.clip_norm must be > 0, got {model_cfg.get('clip_norm')!r}")
    return norm


def recipe_environment(model_cfg: dict) -> dict:
    """What every rank record's `environment` says of the recipe: `clip_grad` (bool),
    `clip_norm` (the bound, or null), and for BERT `max_predictions_per_seq`, the masked
    positions per sequence that the MLM head gathers."""
    norm = clip_norm(model_cfg)
    env = {"clip_grad": norm is not None, "clip_norm": norm}
    if model_cfg.get("name") == "bert_base":
        env["max_predictions_per_seq"] = int(model_cfg["max_predictions_per_seq"])
    return env
