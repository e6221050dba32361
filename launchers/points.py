"""From a composed Hydra config to a sweep point on disk, and from a point to run specs.

A sweep folder holds one folder per point (its `point.json` is the manifest
entry) and one folder per repeat below it:

    SWEEP/points/000-pytorch-resnet50-fp32-1x2-bs8/point.json
    SWEEP/points/000-.../repeat-00/{spec.json, rank-00000.json, ..., run.json}
"""
import copy
import json
import os
import subprocess
import time
from pathlib import Path

from omegaconf import OmegaConf

from frameworks.common import datafiles
from contract import modes, parallel, paths, records
from launchers import auto, health_settings

ROOT = Path(__file__).resolve().parent.parent
POINT_SCHEMA = paths.POINT_SCHEMA


class ConfigError(ValueError):
    """Bad input, said in one line."""


def _positive(cfg, key, minimum=1):
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def validate(cfg) -> None:
    for key in ("nodes", "gpus_per_node", "batch_size", "measure_steps", "repeats", "timeout_s"):
        _positive(cfg, key)
    _positive(cfg, "warmup_steps", 0)
    if cfg.device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device must be auto, cpu or cuda, got {cfg.device!r}")
    sizes = cfg.model.get("sizes") or {}
    if cfg.model.get("sizes") is not None and cfg.model.size not in sizes:
        raise ConfigError(f"unknown model.size {cfg.model.size!r} for {cfg.model.name} "
                          f"(valid: {', '.join(sizes)})")
    if cfg.precision.name == "amp" and cfg.precision.amp_dtype not in ("bf16", "fp16"):
        raise ConfigError(f"precision.amp_dtype must be bf16 or fp16, got {cfg.precision.amp_dtype!r}")
    if cfg.get("memory_limit_mb") is not None:
        _positive(cfg, "memory_limit_mb")
    compile_setting(cfg)
    check_data(cfg)
    model = cfg.model
    if model.get("clip_grad") not in (None, True, False):
        raise ConfigError(f"model.clip_grad must be true or false, got {model.get('clip_grad')!r}")
    norm = model.get("clip_norm")
    if model.get("clip_grad") and norm is not None and not _number(norm, 0.0):
        raise ConfigError(f"model.clip_norm must be a number > 0, got {norm!r}")
    health(cfg)
    if cfg.get("preflight") not in (None, True, False):
        raise ConfigError(f"preflight must be true or false, got {cfg.get('preflight')!r}")
    if cfg.get("preflight") and cfg.get("search") is not None:
        raise ConfigError("preflight=true applies to a sweep's points, not to a search (search=)")
    p = model.get("max_predictions_per_seq")
    if p is not None and not (isinstance(p, int) and not isinstance(p, bool) and p >= 1):
        raise ConfigError(f"model.max_predictions_per_seq must be an integer >= 1, got {p!r}")


def health(cfg) -> dict:
    """The point's checked health settings (launchers/health_settings.py)."""
    node = cfg.get("health")
    try:
        return health_settings.settings(OmegaConf.to_container(node, resolve=True)
                                        if OmegaConf.is_config(node) else node)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def check_data(cfg) -> None:
    """data=files needs a folder that holds what the model reads; data.path is made
    absolute here, since ranks run from the repository root."""
    data = cfg.get("data") or {}
    files = data.get("source") == datafiles.FILES
    if cfg.bench.name == "input" and not files:
        raise ConfigError("bench=input measures an input pipeline: it needs data=files data.path=DIR")
    if not files:
        return
    if cfg.bench.name not in ("train", "input"):
        raise ConfigError(f"data=files applies to bench=train and bench=input, not bench={cfg.bench.name}")
    path, workers = data.get("path"), data.get("workers")
    if not path:
        raise ConfigError("data=files needs data.path=DIR (python -m launch dataset DIR writes one)")
    path = os.path.expanduser(str(path))  # `data.path=~/x`: the shell leaves that ~ alone
    if not os.path.isdir(path):
        raise ConfigError(f"data.path {path!r} is not a folder")
    if cfg.model.name in ("resnet50", "bert_base") and not datafiles.has_samples(path, cfg.model.name):
        want = "train/<class>/*.JPEG" if cfg.model.name == "resnet50" else "bert/pretrain-*.npz"
        raise ConfigError(f"data.path {path!r} holds nothing for {cfg.model.name} (no {want})")
    if workers is not None and not (isinstance(workers, int) and not isinstance(workers, bool)
                                    and workers >= 0):
        raise ConfigError(f"data.workers must be an integer >= 0 or null, got {workers!r}")
    cfg.data.path = os.path.abspath(path)


def _number(value, above) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > above


def compile_setting(cfg):
    """The point's compile setting: "auto", True or False (ConfigError otherwise)."""
    try:
        return modes.setting(cfg.get("compile", modes.AUTO))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def compiled(cfg) -> bool:
    """Whether the point runs its framework's compiled mode: `compile=auto` resolved by
    contract/modes.py (the framework's recommended mode)."""
    return modes.compiled(cfg.framework.name, compile_setting(cfg))


def resolve_model(model_cfg) -> dict:
    """The model's chosen size folded into one flat dict (what a worker builds); model_cfg
    is the config's model node or its resolved dict."""
    m = (OmegaConf.to_container(model_cfg, resolve=True) if OmegaConf.is_config(model_cfg)
         else copy.deepcopy(model_cfg))
    sizes = m.pop("sizes", None)
    # A key set beside `sizes` (`+model.num_classes=10`) wins over the size's own.
    return {**sizes[m["size"]], **m} if sizes is not None else m


def check_layout(cfg, model: dict):
    """(layout, notes) of a point (contract/parallel.py): its grid and batch sizes,
    every relation checked; `model` (resolved) gets the vocabulary a tensor-parallel split
    holds, padded as Megatron pads it where tp does not divide it, and `notes` says so.
    ConfigError names every relation the point breaks, each with its values."""
    world = cfg.nodes * cfg.gpus_per_node
    try:
        lay, bad = parallel.resolve(cfg.get("parallel"), world, cfg.batch_size,
                                    cfg.get("micro_batch_size"), cfg.get("global_batch_size"))
    except parallel.LayoutError as exc:
        raise ConfigError(str(exc)) from None
    name, notes = model.get("name"), []
    if name not in parallel.MODELS:
        if not lay.is_data_parallel() or bad:
            raise ConfigError(f"parallel layouts ({lay.name() or 'dp=' + str(lay.dp)}) are built for "
                              f"model={', '.join(parallel.MODELS)} only, not model={name}")
        return lay, notes
    if cfg.framework.name not in parallel.FRAMEWORKS:
        if not lay.is_data_parallel():
            raise ConfigError(f"parallel layouts ({lay.name()}) are built for framework="
                              f"{', '.join(parallel.FRAMEWORKS)} only, not {cfg.framework.name}")
    bad += parallel.model_violations(model, lay)
    if bad:
        raise ConfigError("; ".join(bad))
    vocab = model.get("vocab_size")
    if vocab and parallel.padded_vocab(vocab, lay.tp) != vocab:
        model["data_vocab_size"], model["vocab_size"] = vocab, parallel.padded_vocab(vocab, lay.tp)
        notes.append(f"vocabulary {vocab} padded to {model['vocab_size']} (a multiple of "
                     f"{parallel.MEGATRON_VOCAB_MULTIPLE} x tp = {parallel.MEGATRON_VOCAB_MULTIPLE * lay.tp}),"
                     " as Megatron-LM pads it")
    return lay, notes


def point_name(cfg, num: int, lay) -> str:
    if cfg.bench.name == "comm":  # model, precision and batch mean nothing to a collective
        return "-".join([f"{num:03d}", "comm", cfg.framework.name, str(cfg.bench.dtype),
                         f"{cfg.nodes}x{cfg.gpus_per_node}"])
    parts = [f"{num:03d}", cfg.framework.name, cfg.model.name]
    if cfg.bench.name != "train":
        parts.insert(1, cfg.bench.name)
    parts += [cfg.precision.name, f"{cfg.nodes}x{cfg.gpus_per_node}", f"bs{cfg.batch_size}"]
    if (cfg.get("data") or {}).get("source") == datafiles.FILES:  # and its workers, where set
        parts.append("files" + ("" if cfg.data.workers is None else f"-w{cfg.data.workers}"))
    if lay.name():  # a layout other than plain data parallelism
        parts.append(lay.name())
    if compiled(cfg) and cfg.bench.name != "input":  # compile=auto: named by what it
        parts.append("compile")                       # resolves to (bench=input: no model)
    return "-".join(parts)


def suite_commit() -> str:
    """The suite's git commit, marked dirty when the tree has changes; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def launcher_settings(config: dict) -> dict:
    """The point's launcher settings from its resolved config; `launcher=auto` resolved
    (launchers/auto.py), saying why."""
    settings = copy.deepcopy(config["launcher"])
    if settings.get("name") == "auto":
        settings["name"], settings["auto"] = auto.choose()
    return settings


BATCH_MAX_START = 8


def batch_size_max(cfg):
    """`batch_size=max` (DLPerf's "bsz=max") is the search of the largest batch that trains
    (launchers/search.py), from 8 upwards: `search={key:batch_size,start:8}`. Not from 1: a
    batch of one fails batch norm's training statistics wherever a feature map is 1x1."""
    if cfg.get("batch_size") != "max":
        return cfg
    if cfg.get("search") is not None:
        raise ConfigError("batch_size=max is itself a search: give it or search=, not both")
    return OmegaConf.merge(cfg, {"batch_size": BATCH_MAX_START, "search": {"key": "batch_size"}})


COMMIT = object()  # make_point's default: look the commit up (a sweep looks it up once)


def make_point(cfg, sweep_dir, num: int, overrides=(), commit=COMMIT) -> dict:
    """Validate cfg and return the point (not yet written)."""
    cfg = batch_size_max(cfg)
    validate(cfg)
    config = OmegaConf.to_container(cfg, resolve=True)  # resolved once; the point's parts are copies
    model = resolve_model(config["model"])
    lay, notes = check_layout(cfg, model)
    name = point_name(cfg, num, lay)
    setting, is_compiled = compile_setting(cfg), compiled(cfg)

    def part(key):
        return copy.deepcopy(config.get(key))
    return {
        "schema": POINT_SCHEMA, "version": paths.SCHEMA_VERSION,
        "point": name, "num": num,
        "dir": str(Path(paths.point_dir(sweep_dir, name)).resolve()),
        "bench": config["bench"]["name"],
        "bench_options": part("bench"),
        "framework": part("framework"),
        "model": model,
        "parallel": lay.as_dict(),        # the grid and batch sizes (contract/parallel.py)
        "notes": notes,                   # what was changed to fit the layout, said at submission
        "case": config.get("case"),       # a published case's name (gpt_case=...), or None
        "precision": config["precision"]["name"],
        "amp_dtype": config["precision"]["amp_dtype"],
        "compile": is_compiled,           # resolved: compile=auto is the framework's own choice
        "compile_setting": setting,       # as given: "auto", true or false
        "mode": modes.mode_name(config["framework"]["name"], is_compiled),  # eager, jit, graph, ...
        "batch_size": lay.micro_batch_size,  # per device and forward: batch_size, or micro_batch_size
        **{key: config[key] for key in ("nodes", "gpus_per_node")},
        "world_size": config["nodes"] * config["gpus_per_node"],
        **{key: config[key] for key in ("warmup_steps", "measure_steps", "repeats", "device", "seed",
                                        "timeout_s", "rendezvous_timeout_s")},
        "memory_limit_mb": config.get("memory_limit_mb"),
        "preflight": bool(config.get("preflight")),
        "health": health(cfg),            # checked; `checks` resolved to names
        "search": part("search"),         # checked in launchers/search.py
        "launcher": launcher_settings(config),
        "cluster": part("cluster"),
        "overrides": list(overrides),
        "config": config,
        "suite_commit": suite_commit() if commit is COMMIT else commit,
        "created_unix": time.time(),
    }


def write_point(point: dict) -> None:
    os.makedirs(point["dir"], exist_ok=True)
    records.write_json_atomic(os.path.join(point["dir"], paths.POINT_FILE), point)


def read_point(point_dir) -> dict:
    with open(os.path.join(point_dir, paths.POINT_FILE)) as f:
        return json.load(f)


def repeat_dir(point: dict, repeat: int) -> str:
    return paths.repeat_dir(point["dir"], repeat)


def recorded(point: dict) -> int:
    """How many of the point's repeats are recorded (their run.json exists)."""
    return sum(os.path.exists(os.path.join(repeat_dir(point, r), paths.RUN_FILE))
               for r in range(point["repeats"]))


def run_spec(point: dict, repeat: int) -> dict:
    """What one repeat's workers read: the point's settings, the repeat, where to write."""
    keep = ("point", "bench", "bench_options", "model", "precision", "amp_dtype", "compile",
            "batch_size", "warmup_steps", "measure_steps", "device", "seed", "rendezvous_timeout_s",
            "suite_commit", "config")
    optional = ("parallel",)  # points written before layouts have none
    spec = {"schema": paths.SPEC_SCHEMA, "version": paths.SCHEMA_VERSION}
    spec.update({k: point[k] for k in keep})
    spec.update({k: point[k] for k in optional if k in point})
    # A point written before compile=auto existed has neither: its compile was explicit.
    spec["compile_setting"] = point.get("compile_setting", point["compile"])
    spec["mode"] = point.get("mode") or modes.mode_name(point["framework"]["name"], point["compile"])
    spec.update(framework=point["framework"]["name"], repeat=repeat,
                record_dir=repeat_dir(point, repeat), options=point["framework"].get("options", {}),
                memory_limit_mb=point.get("memory_limit_mb"))
    return spec


def rank_environ(base, drop, additions: dict) -> dict:
    """A rank's environment, as each launcher builds it: `base` (os.environ when None)
    without the variables `drop(name)` is true of, plus the launcher's `additions`;
    PYTHONPATH leads to the suite, then whatever PYTHONPATH was there."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not drop(k)}
    env.update(additions)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


class WorkerUnavailable(RuntimeError):
    """The framework's interpreter is not there: the repeat fails with this message."""


def worker_argv(point: dict, spec_path: str, python: str) -> list:
    """The worker command: the framework's interpreter (or ours) running the harness.

    A relative interpreter path is taken from the repository root (`.venvs/<name>`)."""
    fw_python = point["framework"].get("python")
    if fw_python:
        python = str(ROOT / fw_python)
        if not os.path.exists(python) and not point["framework"].get("container"):
            raise WorkerUnavailable(f"{point['framework']['name']} interpreter {fw_python} not found "
                                    f"(make env-{point['framework']['name']} builds it)")
        if os.path.isfile(python) and not os.access(python, os.X_OK):
            raise WorkerUnavailable(f"{point['framework']['name']} interpreter {fw_python} "
                                    "is not executable")
    return [python, "-m", "frameworks", "--spec", spec_path]
