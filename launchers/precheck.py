"""Command-line overrides checked before Hydra starts, so that bad input costs one
clear line and nothing has run yet: unknown names (with the valid ones), sizes
out of range in any sweep value, unknown keys, an output folder that cannot be
written. Points are validated again, whole, in points.validate.
"""
import os
import tempfile
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parent.parent / "conf"
MINIMUM = {"nodes": 1, "gpus_per_node": 1, "batch_size": 1, "measure_steps": 1,
           "repeats": 1, "timeout_s": 1, "warmup_steps": 0}


def groups() -> dict:
    return {d.name: sorted(p.stem for p in d.glob("*.yaml"))
            for d in sorted(CONF.iterdir()) if d.is_dir()}


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


def check(argv) -> str:
    """The first problem with the overrides in argv, or None."""
    args = [a for a in argv if "=" in a and not a.startswith("-")]
    try:
        overrides = OverridesParser.create().parse_overrides(args)
    except Exception as exc:
        return f"cannot parse overrides: {str(exc).splitlines()[0]}"
    known = groups()
    top = OmegaConf.load(CONF / "config.yaml")
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
        elif head not in top and head not in known and head != "hydra" and ov.key_or_group[0] != "+":
            return f"unknown key {key!r} (valid: {', '.join(sorted(set(top) | set(known)))})"
        if key in MINIMUM:
            for v in values:
                if not isinstance(v, int) or isinstance(v, bool) or v < MINIMUM[key]:
                    return f"{key} must be an integer >= {MINIMUM[key]}, got {v!r}"
        if key == "output_root" and values:
            output_root = str(values[0])
    return _writable(output_root)
