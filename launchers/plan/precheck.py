"""Command-line overrides checked before Hydra starts, so that bad input costs one
clear line and nothing has run yet: unknown names (with the valid ones), sizes
out of range in any sweep value, a compile value other than auto, true or false,
unknown keys, an output folder that cannot be written. Points are validated again,
whole, in launchers/plan/checks.py.

The valid names of a config group are the ones Hydra itself would find: the suite's
conf/, a site's folder given with `--config-dir SITE`, and every `hydra.searchpath`
entry (a folder, or `pkg://` a package of configs), so a site keeps its cluster files
outside the checkout.
"""
import os
import tempfile
from pathlib import Path
from typing import cast

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from contract import modes
from contract.values import is_integer

CONF = Path(__file__).resolve().parent.parent.parent / "conf"
# Folders of conf/ that are no config group of a point: Hydra's own, and the certification
# suites (conf/certify/, read by certify/suite.py, never composed into a point).
NOT_GROUPS = ("hydra", "certify")
MINIMUM = {"nodes": 1, "gpus_per_node": 1, "batch_size": 1, "measure_steps": 1,
           "repeats": 1, "timeout_s": 1, "warmup_steps": 0}


def config_dir(argv):
    """The value of Hydra's `--config-dir DIR` / `--config-dir=DIR` / `-cd DIR`, or None."""
    for i, arg in enumerate(argv):
        if arg.startswith("--config-dir="):
            return arg.split("=", 1)[1]
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            return argv[i + 1]
    return None


def groups(extra_dir=None, overrides=()) -> dict:
    """group -> its option names, from Hydra's config search path as `python -m launch`
    builds it (hydra's own helpers; hydra-core is pinned)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.core.object_type import ObjectType
    from hydra.core.config_search_path import SearchPathQuery
    path = create_config_search_path(f"file://{CONF}")
    if extra_dir:
        path.prepend(provider="command-line", path=f"file://{os.path.abspath(extra_dir)}",
                     anchor=SearchPathQuery(provider="schema"))
    loader = ConfigLoaderImpl(config_search_path=path)
    searchpath = [o for o in overrides if o.split("=", 1)[0].lstrip("+") == "hydra.searchpath"]
    # What loader.get_group_options does, once for all groups (it reads config.yaml each call).
    _, repo = loader._parse_overrides_and_create_caching_repo("config", searchpath)

    def options(group, kind=ObjectType.CONFIG):
        return sorted(repo.get_group_options(group, kind))
    return {g: options(g) for g in options("", ObjectType.GROUP) if g not in NOT_GROUPS}


def _values(override):
    if override.is_sweep_override():
        try:
            return list(override.sweep_iterator())
        except Exception:  # glob() and interval sweeps are Hydra's business
            return []
    return [override.value()]


def _writable(folder: str):
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"output folder {folder!r} cannot be written: {exc.strerror or exc}"
    return None


def _nested(top, key: str):
    """A dotted key below one of config.yaml's own mappings (health.expect.x) that the
    mapping lacks: Hydra would refuse it with a traceback."""
    node, parts = top, key.split(".")
    for i, part in enumerate(parts):
        if not OmegaConf.is_dict(node):
            return None  # below a value, a list or null: Hydra's to judge
        if part not in node:
            where = ".".join(parts[:i])
            return (f"unknown key {key!r} (valid in {where}: {', '.join(node)})" if where
                    else None)
        node = node[part]
    return None


def check(argv) -> str:
    """The first problem with the overrides in argv, or None."""
    args = [a for a in argv if "=" in a and not a.startswith("-")]
    try:
        overrides = OverridesParser.create().parse_overrides(args)
    except Exception as exc:
        return f"cannot parse overrides: {str(exc).splitlines()[0]}"
    site = config_dir(argv)
    if site is not None and not os.path.isdir(site):
        return f"--config-dir {site!r} is not a folder"
    try:
        known = groups(site, args)
    except Exception as exc:  # a hydra.searchpath entry that is not there, say
        return f"cannot read the config search path: {str(exc).splitlines()[0]}"
    top = cast(DictConfig, OmegaConf.load(CONF / "config.yaml"))
    top.pop("defaults")
    output_root = top.output_root
    for ov in overrides:
        key = ov.key_or_group.lstrip("+~")
        head = key.split(".")[0]
        values = _values(ov)
        if key in known:
            for v in values:
                if str(v) not in known[key]:
                    return f"unknown {key} {v!r} (valid: {', '.join(known[key])})"
        elif head not in top and head not in known and head.split("/")[0] != "hydra" \
                and ov.key_or_group[0] != "+":  # hydra.* and hydra/launcher=... are Hydra's
            return f"unknown key {key!r} (valid: {', '.join(sorted(set(top) | set(known)))})"
        elif head in top and head != "hydra" and ov.key_or_group[0] not in "+~":
            problem = _nested(top, key)
            if problem:
                return problem
        if key in MINIMUM:
            for v in values:
                if key == "batch_size" and v == "max":  # a search (points.batch_size_max)
                    continue
                if not is_integer(v) or v < MINIMUM[key]:
                    return f"{key} must be an integer >= {MINIMUM[key]}, got {v!r}"
        if key == "compile":
            for v in values:
                try:
                    modes.setting(v)
                except ValueError as exc:
                    return str(exc)
        if key == "output_root" and values:
            output_root = str(values[0])
    return _writable(output_root)
