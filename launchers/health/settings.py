"""The `health.*` settings (conf/config.yaml, docs/health.md) checked once, before anything
runs: bad input is one line (a ValueError, which points.validate turns into its
ConfigError), never a health step that fails later. Types by contract/values.py's rule."""
import dataclasses

from contract import values
from contract.point import Expect
from healthchecks import nodechecks

EXPECT_KEYS = tuple(f.name for f in dataclasses.fields(Expect))


def expect(given) -> dict:
    """health.expect: the site's figures, each null or a number > 0 (GPUs: an integer)."""
    if given is None:
        return {}
    if not isinstance(given, dict):
        raise ValueError(f"health.expect must be a mapping of {', '.join(EXPECT_KEYS)}, got {given!r}")
    unknown = sorted(set(given) - set(EXPECT_KEYS), key=str)
    if unknown:
        raise ValueError(f"unknown health.expect key {unknown[0]!r} (valid: {', '.join(EXPECT_KEYS)})")
    for key in EXPECT_KEYS:
        if key == "gpus_per_node":
            values.optional(values.integer, given.get(key), f"health.expect.{key}")
        else:
            values.optional(values.number, given.get(key), f"health.expect.{key}", above=0)
    return dict(given)


def settings(health) -> dict:
    """The resolved health node (a dict or DictConfig) -> a plain, checked dict with
    `checks` as the list of check names."""
    h = dict(health or {})
    checks = h.get("checks", "all")
    if checks == "all" or checks is None:
        checks = list(nodechecks.CHECKS)
    elif isinstance(checks, str):
        checks = [checks]
    checks = list(checks)
    unknown = [c for c in checks if c not in nodechecks.CHECKS]
    if unknown:
        raise ValueError(f"unknown health check {unknown[0]!r} in health.checks "
                         f"(valid: all, {', '.join(nodechecks.CHECKS)})")
    h["checks"] = checks
    values.number(h.get("min_fraction", 0.8), "health.min_fraction", above=0, at_most=1)
    values.integer(h.get("retries", 2), "health.retries", 0)
    for key in ("link_mb", "matmul_s", "timeout_s"):
        values.number(h.get(key), f"health.{key}", above=0)
    values.number(h.get("link_cap_s", 2), "health.link_cap_s", above=0)
    values.integer(h.get("link_iters"), "health.link_iters")
    values.optional(values.integer, h.get("matmul_n"), "health.matmul_n")
    scripts = h.get("site_checks") or []
    if not isinstance(scripts, (list, tuple)) or not all(isinstance(s, str) and s for s in scripts):
        raise ValueError(f"health.site_checks must be a list of script paths, got {scripts!r}")
    h["site_checks"] = list(scripts)
    h["expect"] = expect(h.get("expect"))
    return h
