"""The `health.*` settings (conf/config.yaml, docs/health.md) checked once, before anything
runs: bad input is one line (a ValueError, which points.validate turns into its
ConfigError), never a health step that fails later. Types by contract/values.py's rule."""
from contract import values
from healthchecks import nodechecks


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
    values.integer(h.get("link_iters"), "health.link_iters")
    values.optional(values.integer, h.get("matmul_n"), "health.matmul_n")
    scripts = h.get("site_checks") or []
    if not isinstance(scripts, (list, tuple)) or not all(isinstance(s, str) and s for s in scripts):
        raise ValueError(f"health.site_checks must be a list of script paths, got {scripts!r}")
    h["site_checks"] = list(scripts)
    return h
