"""A point's config checked before anything is made of it (launchers/plan/points.py), bad
input in one line (ConfigError): each setting's type and range, the relations between
settings (the model's size among its sizes, data=files and its folder, checkpoints and the
bench, preflight and search), the compile setting (contract/modes.py), the site's lists,
mappings and images. data.path and checkpoint.dir are made absolute here: ranks run from
the checkout.
"""
import os

from omegaconf import OmegaConf

from contract import checkpoint, modes, values
from frameworks.common import datafiles
from launchers.health import settings as health_settings
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
