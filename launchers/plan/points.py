"""From a composed Hydra config to a sweep point, typed (contract/point.py), and from a
point to the run spec of one repeat (contract/spec.py).

The point is built and checked here, once; everything after reads its attributes. On disk a
sweep folder holds one folder per point (its `point.json` is the manifest entry) and one
folder per repeat below it:

    SWEEP/points/000-pytorch-resnet50-fp32-1x2-bs8/point.json
    SWEEP/points/000-.../repeat-00/{spec.json, rank-00000.json, ..., run.json}
"""
import copy
import os
import time
from pathlib import Path

from omegaconf import OmegaConf

from contract import checkpoint, modes, parallel, paths, typed, values
from contract.frozen import Settings
from contract.point import Point
from frameworks.common import datafiles
from launchers import auto, suite
from launchers.health import settings as health_settings
from launchers.plan import search
from launchers.suite import ConfigError

CONTAINER_RUNTIMES = ("pyxis", "apptainer", "charliecloud")  # launchers/backends/containers.py


def _positive(cfg, key, minimum=1):
    return values.integer(cfg.get(key), key, minimum, error=ConfigError)


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
    check_checkpoint(cfg)
    model = cfg.model
    values.optional(values.boolean, model.get("clip_grad"), "model.clip_grad", error=ConfigError)
    if model.get("clip_grad"):
        values.optional(values.number, model.get("clip_norm"), "model.clip_norm", above=0,
                        error=ConfigError)
    health(cfg)
    check_cluster(cfg)
    values.optional(values.boolean, cfg.get("preflight"), "preflight", error=ConfigError)
    if cfg.get("preflight") and cfg.get("search") is not None:
        raise ConfigError("preflight=true applies to a sweep's points, not to a search (search=)")
    values.optional(values.integer, model.get("max_predictions_per_seq"),
                    "model.max_predictions_per_seq", 1, error=ConfigError)


def health(cfg) -> dict:
    """The point's checked health settings (launchers/health/settings.py)."""
    node = cfg.get("health")
    try:
        return health_settings.settings(OmegaConf.to_container(node, resolve=True)
                                        if OmegaConf.is_config(node) else node)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def check_cluster(cfg) -> None:
    """The site's lists and mappings (conf/cluster/<site>.yaml) are what they say."""
    cl = cfg.get("cluster") or {}
    for keys, kind, is_kind in ((("srun_args", "container_mounts"), "a list", OmegaConf.is_list),
                                (("sbatch_args", "env", "containers"), "a mapping", OmegaConf.is_dict)):
        for key in keys:
            if cl.get(key) is not None and not is_kind(cl.get(key)):
                raise ConfigError(f"cluster.{key} must be {kind}, got {cl.get(key)!r}")
    images = cl.get("containers")
    for fw in (images or {}):
        if OmegaConf.is_missing(images, fw):  # ??? in the site file: the user names it
            raise ConfigError(f"cluster.containers.{fw} is not set: the site leaves its image to "
                              f"you (cluster.containers.{fw}=IMAGE)")
    runtime = cl.get("container_runtime", "pyxis")
    if runtime not in CONTAINER_RUNTIMES:
        raise ConfigError(f"cluster.container_runtime must be one of {', '.join(CONTAINER_RUNTIMES)}, "
                          f"got {runtime!r}")


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
    if workers is not None and not (values.is_integer(workers) and workers >= 0):
        raise ConfigError(f"data.workers must be an integer >= 0 or null, got {workers!r}")
    cfg.data.path = os.path.abspath(path)


def checkpoint_settings(cfg) -> checkpoint.Checkpoint:
    """The point's checked checkpoint settings (contract/checkpoint.py)."""
    node = cfg.get("checkpoint")
    given = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    try:
        return checkpoint.settings({"checkpoint": given})
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc).splitlines()[0]) from None


def check_checkpoint(cfg) -> None:
    """checkpoint.* and bench=checkpoint's options, checked; checkpoint.dir made absolute
    (ranks run from the repository root). checkpoint.every trains: bench=train, PyTorch,
    synthetic data (docs/checkpoint.md)."""
    s = checkpoint_settings(cfg)
    bench = cfg.bench.name
    if s.every is not None:
        if bench != "train":
            raise ConfigError(f"checkpoint.every applies to bench=train, not bench={bench} "
                              "(bench=checkpoint measures one save and load per repeat)")
        if cfg.framework.name != "pytorch":
            raise ConfigError(f"checkpoint.every is built for framework=pytorch, not {cfg.framework.name}")
        if (cfg.get("data") or {}).get("source") == datafiles.FILES:
            raise ConfigError("checkpoint.every is built for synthetic data, not data=files")
    if bench == "checkpoint":
        try:
            checkpoint.bench_options(OmegaConf.to_container(cfg.bench, resolve=True))
        except (ValueError, TypeError) as exc:
            raise ConfigError(str(exc).splitlines()[0]) from None
    if s.dir is not None:
        cfg.checkpoint.dir = s.dir


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
    ckpt = checkpoint_settings(cfg).label(cfg.bench.name)   # ckpt-sync, ckpt10-async, or none
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
    """Validate cfg and return the point (not yet written), built and checked once here:
    a key the point's framework, launcher or cluster does not know is refused."""
    cfg = batch_size_max(cfg)
    validate(cfg)
    config = OmegaConf.to_container(cfg, resolve=True)  # resolved once; the point's parts are copies
    model = resolve_model(config["model"])
    lay, notes = check_layout(cfg, model)
    name = point_name(cfg, num, lay)
    setting, is_compiled = compile_setting(cfg), compiled(cfg)
    point = {
        "point": name, "num": num,
        "dir": str(Path(paths.point_dir(sweep_dir, name)).resolve()),
        "bench": config["bench"]["name"],
        "bench_options": config["bench"],
        "framework": config["framework"],
        "model": model,
        "parallel": lay,                  # the grid and batch sizes (contract/parallel.py)
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
        "search": config.get("search"),   # checked and completed below (plan/search.py)
        "launcher": launcher_settings(config),
        "cluster": config.get("cluster"),
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
