"""From a composed Hydra config to a sweep point, typed (contract/point.py): checked whole
first (launchers/plan/checks.py), then made once here: the model's size folded in, the
layout (contract/parallel.py), the name, the mode (its adapter's modes), launcher=auto
resolved (launchers/auto.py), the search's settings completed (launchers/plan/search.py).
Everything after reads its attributes; the backends write it (launchers/sweepdir.py).
"""
import copy
import time
from pathlib import Path
from typing import cast

from omegaconf import OmegaConf

from contract import parallel, paths, typed
from contract.frozen import Settings
from contract.point import Point
from frameworks import registry
from frameworks.common import datafiles
from launchers import auto, suite
from launchers.plan import checks, search
from launchers.suite import ConfigError


def resolve_model(model_cfg) -> dict:
    """The model's chosen size folded into one flat dict (what a worker builds); model_cfg
    is the config's model node or its resolved dict."""
    m = cast(dict, OmegaConf.to_container(model_cfg, resolve=True) if OmegaConf.is_config(model_cfg)
             else copy.deepcopy(model_cfg))
    sizes = m.pop("sizes", None)
    # A key set beside `sizes` (`+model.num_classes=10`) wins over the size's own.
    return {**sizes[m["size"]], **m} if sizes is not None else m


def check_layout(cfg, model: dict):
    """(layout, notes) of a point (contract/parallel.py): its grid and batch sizes,
    every relation checked; `model` (resolved) gets the vocabulary a tensor-parallel split
    holds, padded as Megatron pads it (contract/parallel.py's pad_vocabulary), and `notes` says so.
    ConfigError names every relation the point breaks, each with its values."""
    world = cfg.nodes * cfg.gpus_per_node
    try:
        lay, bad = parallel.resolve(cfg.get("parallel"), world, cfg.batch_size,
                                    cfg.get("micro_batch_size"), cfg.get("global_batch_size"))
    except parallel.LayoutError as exc:
        raise ConfigError(str(exc)) from None
    name = model.get("name")
    notes: list = []
    if name not in parallel.layout_models():
        if not lay.is_data_parallel() or bad:
            raise ConfigError(f"parallel layouts ({lay.name() or 'dp=' + str(lay.dp)}) are built for "
                              f"model={', '.join(parallel.layout_models())} only, not model={name}")
        return lay, notes
    if not checks.adapter(cfg).layouts:
        if not lay.is_data_parallel():
            raise ConfigError(f"parallel layouts ({lay.name()}) are built for framework="
                              f"{', '.join(registry.which('layouts'))} only, not {cfg.framework.name}")
    bad += parallel.model_violations(model, lay)
    if bad:
        raise ConfigError("; ".join(bad))
    padded = parallel.pad_vocabulary(model, lay.tp)
    return lay, notes + ([padded] if padded else [])


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
    if checks.compiled(cfg) and cfg.bench.name != "input":  # compile=auto: named by what it
        parts.append("compile")                       # resolves to (bench=input: no model)
    ckpt = checks.checkpoint_settings(cfg).label(cfg.bench.name)   # ckpt-sync, ckpt10-async, or none
    if ckpt:
        parts.append(ckpt)
    return "-".join(parts)


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
    (launchers/plan/search.py), from 8 upwards: `search={key:batch_size,start:8}`. Not from 1: a
    batch of one fails batch norm's training statistics wherever a feature map is 1x1."""
    if cfg.get("batch_size") != "max":
        return cfg
    if cfg.get("search") is not None:
        raise ConfigError("batch_size=max is itself a search: give it or search=, not both")
    return OmegaConf.merge(cfg, {"batch_size": BATCH_MAX_START, "search": {"key": "batch_size"}})


COMMIT = object()  # make_point's default: look the commit up (a sweep looks it up once)


def make_point(cfg, sweep_dir, num: int, overrides=(), commit=COMMIT) -> Point:
    """Validate cfg (launchers/plan/checks.py) and return the point (not yet written), built
    and checked once here: a key the point's framework, launcher or cluster does not know is
    refused, and the search's settings are completed (launchers/plan/search.py)."""
    cfg = batch_size_max(cfg)
    given = checks.validate(cfg)        # the config's values of the point's own fields, checked
    config = cast(dict, OmegaConf.to_container(cfg, resolve=True))  # resolved once; the point's parts are copies
    model = resolve_model(config["model"])
    lay, notes = check_layout(cfg, model)
    name = point_name(cfg, num, lay)
    setting, is_compiled = checks.compile_setting(cfg), checks.compiled(cfg)
    point = {
        **given,                          # nodes, device, seed, ..., health (checks as names), cluster
        "point": name, "num": num,
        "dir": str(Path(paths.point_dir(sweep_dir, name)).resolve()),
        "bench": config["bench"]["name"],
        "bench_options": config["bench"],
        "model": model,
        "parallel": lay,                  # the grid and batch sizes (contract/parallel.py)
        "notes": notes,                   # what was changed to fit the layout, said at submission
        "precision": config["precision"]["name"],
        "compile": is_compiled,           # resolved: compile=auto is the framework's own choice
        "compile_setting": setting,       # as given: "auto", true or false
        "mode": checks.adapter(cfg).modes.name(is_compiled),  # eager, jit, graph, ...
        "batch_size": lay.micro_batch_size,  # per device and forward: batch_size, or micro_batch_size
        "world_size": config["nodes"] * config["gpus_per_node"],
        "launcher": launcher_settings(config),  # launcher=auto resolved
        "overrides": list(overrides),
        "config": config,
        "suite_commit": suite.commit() if commit is COMMIT else commit,
        "created_unix": time.time(),
    }
    try:
        made = Point.from_dict(point, unknown="refuse")
    except (typed.UnknownKey, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    if made.search is not None:  # whole from here on: the driver and the backends read it as it is
        made = made.replace(search=Settings(search.settings(made)))
    return made
