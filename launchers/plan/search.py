"""A search's settings (`search={key,start,max,tolerance}`, docs/special.md), checked and
completed once, when the point is made: `start` defaults to the point's own value of `key`,
`max` to start x 2^20. The point then carries them whole; the driver runs the search with
them (launchers/driver/search.py) and the Slurm launcher sizes its allocation by them.

Bad settings are ConfigError, in one line, before any point runs.
"""
from collections.abc import Mapping

from contract import values
from launchers.suite import ConfigError

DEFAULTS = {"start": None, "max": None, "tolerance": 0.05}


def settings(point) -> dict:
    """The point's search settings, checked and completed; raises ConfigError."""
    s = point.search
    if not isinstance(s, Mapping) or not isinstance(s.get("key"), str):
        raise ConfigError("search needs a key, e.g. search={key:model.num_classes,start:1024}")
    unknown = set(s) - {"key", *DEFAULTS}
    if unknown:
        raise ConfigError(f"unknown search setting(s) {', '.join(sorted(unknown))} "
                          f"(valid: key, {', '.join(DEFAULTS)})")
    s = {**DEFAULTS, **s}
    current = _get(point, s["key"])
    if not values.is_integer(current):
        raise ConfigError(f"search key {s['key']!r} is not an integer setting of this point")
    s["start"] = current if s["start"] is None else s["start"]
    s["max"] = s["start"] * 2**20 if s["max"] is None else s["max"]
    for name in ("start", "max"):
        values.integer(s[name], f"search.{name}", error=ConfigError)
    if s["max"] < s["start"]:
        raise ConfigError(f"search.max ({s['max']}) is below search.start ({s['start']})")
    if not values.is_number(s["tolerance"]) or not 0 < s["tolerance"] < 1:
        raise ConfigError(f"search.tolerance must be a fraction in (0, 1), got {s['tolerance']!r}")
    return s


def _get(point, key: str):
    """The value of a dotted key of the point (`batch_size`, `model.num_classes`), or None."""
    head, *rest = key.split(".")
    node = getattr(point, head, None)
    for part in rest:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node
