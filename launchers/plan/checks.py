"""A point's config checked before anything is made of it (launchers/plan/points.py), bad
input in one line (ConfigError):

- each of the point's own settings by its declaration on the typed point (contract/point.py:
  its type, bounds and choices, checked by contract/typed.py against values.py's rule);
- what a declaration cannot say: the relations between settings (the model's size among its
  sizes, a model's spec and the framework that is to run it, data=files and its folder,
  checkpoints and the bench, preflight and search), the compile setting (contract/modes.py),
  the model's recipe keys, a site's image left to the user. data.path and checkpoint.dir are
  made absolute here: ranks run from the checkout.
"""
import os
from typing import cast

from omegaconf import OmegaConf

from contract import checkpoint, models, modes, secrets, typed, values
from contract.point import Point
from frameworks import registry
from frameworks.common import datafiles
from launchers.health import settings as health_settings
from launchers.suite import ConfigError

# The point's fields that the config gives as they are (the rest are made from the config).
AS_GIVEN = ("nodes", "gpus_per_node", "batch_size", "warmup_steps", "measure_steps", "repeats",
            "device", "seed", "timeout_s", "rendezvous_timeout_s", "memory_limit_mb", "case",
            "search", "framework", "launcher", "cluster")


def validate(cfg) -> dict:
    """Check cfg whole -> the point's fields as the config gives them, checked; ConfigError
    names the first mistake. data.path and checkpoint.dir in cfg are made absolute."""
    fields = given(cast(dict, OmegaConf.to_container(cfg, resolve=True)))
    try:
        typed.check(Point, fields)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    sizes = cfg.model.get("sizes") or {}
    if cfg.model.get("sizes") is not None and cfg.model.size not in sizes:
        raise ConfigError(f"unknown model.size {cfg.model.size!r} for {cfg.model.name} "
                          f"(valid: {', '.join(sizes)})")
    if cfg.bench.name != "comm":   # the model's spec (contract/models/), which the framework's adapter trains
        adapter(cfg)                # (a framework without an adapter: that line first)
        try:
            registry.check_model(cfg.model.name, cfg.framework.name)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    compile_setting(cfg)
    check_arguments(fields)
    check_data(cfg)
    check_checkpoint(cfg)
    check_recipe(cfg.model)
    check_images(cfg)
    if cfg.get("preflight") and cfg.get("search") is not None:
        raise ConfigError("preflight=true applies to a sweep's points, not to a search (search=)")
    return fields


def given(config: dict) -> dict:
    """The point's own fields from the resolved config, before anything is made of them;
    `health` with its checks resolved to names (launchers/health/settings.py)."""
    fields = {key: config[key] for key in AS_GIVEN if key in config}
    fields["amp_dtype"] = config["precision"].get("amp_dtype")
    preflight = config.get("preflight")
    fields["preflight"] = False if preflight is None else preflight
    try:
        fields["health"] = health_settings.settings(config.get("health"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return fields


def check_recipe(model) -> None:
    """The training recipe's keys a model may have (BERT's), by the one type rule."""
    values.optional(values.boolean, model.get("clip_grad"), "model.clip_grad", error=ConfigError)
    if model.get("clip_grad"):
        values.optional(values.number, model.get("clip_norm"), "model.clip_norm", above=0,
                        error=ConfigError)
    values.optional(values.integer, model.get("max_predictions_per_seq"),
                    "model.max_predictions_per_seq", 1, error=ConfigError)


def check_images(cfg) -> None:
    """A site file's image left as ??? is the user's to name."""
    images = (cfg.get("cluster") or {}).get("containers")
    for fw in (images or {}):
        if OmegaConf.is_missing(images, fw):  # ??? in the site file: the user names it
            raise ConfigError(f"cluster.containers.{fw} is not set: the site leaves its image to "
                              f"you (cluster.containers.{fw}=IMAGE)")


# What becomes an argument of sbatch, srun or a runtime: shown by ps to every user of a node,
# and by sacct (a job's comment, its submit line) to every user of the cluster.
ARGUMENTS = ("sbatch_args", "srun_args", "containers", "container_mounts")


def check_arguments(fields: dict) -> None:
    """No secret (contract/secrets.py) in an argument: cluster.env takes it to the ranks by
    their environment. One line naming the setting, never the value."""
    cluster = fields.get("cluster") or {}
    args = {k: cluster.get(k) for k in ARGUMENTS if cluster.get(k)}
    args["framework.container"] = (fields.get("framework") or {}).get("container")
    _, where = secrets.changes(args, extra=cluster.get("secret_keys") or ())
    if where:
        name = where[0] if where[0].startswith("framework.") else f"cluster.{where[0]}"
        raise ConfigError(f"{name} holds a secret, which as an argument of sbatch or srun anyone "
                          "could read (ps, sacct): give it in cluster.env, which reaches the ranks "
                          "through their environment (docs/configuration.md, Secrets)")


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
    if models.get(cfg.model.name).files and not datafiles.has_samples(path, cfg.model.name):
        want = datafiles.wanted(cfg.model.name)
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
        if not adapter(cfg).checkpoints:
            raise ConfigError(f"checkpoint.every is built for framework="
                              f"{', '.join(registry.which('checkpoints'))}, not {cfg.framework.name}")
        if (cfg.get("data") or {}).get("source") == datafiles.FILES:
            raise ConfigError("checkpoint.every is built for synthetic data, not data=files")
    if bench == "checkpoint":
        try:
            checkpoint.bench_options(cast(dict, OmegaConf.to_container(cfg.bench, resolve=True)))
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


def adapter(cfg) -> registry.Adapter:
    """The point's framework's adapter (frameworks/<name>/__init__.py), or ConfigError."""
    name, known = cfg.framework.name, registry.names()
    if name not in known:
        raise ConfigError(f"framework={name} has no adapter (no frameworks/{name}/__init__.py; "
                          f"the suite's: {', '.join(known)})")
    return registry.get(name)


def compiled(cfg) -> bool:
    """Whether the point runs its framework's compiled mode: `compile=auto` resolved by
    its adapter's modes (the framework's recommended mode)."""
    return adapter(cfg).modes.compiled(compile_setting(cfg))
