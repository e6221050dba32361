"""The `health.*` settings (conf/config.yaml, docs/health.md) checked once, before anything
runs: bad input is one line (a ValueError, which points.validate turns into its
ConfigError), never a health step that fails later."""
from healthchecks import nodechecks


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
    fraction = h.get("min_fraction", 0.8)
    if not _number(fraction) or not 0 < fraction <= 1:
        raise ValueError(f"health.min_fraction must be a number in (0, 1], got {fraction!r}")
    retries = h.get("retries", 2)
    if not _int(retries) or retries < 0:
        raise ValueError(f"health.retries must be an integer >= 0, got {retries!r}")
    for key, low in (("link_mb", 0), ("matmul_s", 0), ("timeout_s", 0)):
        if not _number(h.get(key)) or h[key] <= low:
            raise ValueError(f"health.{key} must be a number > {low}, got {h.get(key)!r}")
    for key in ("link_iters",) + (("matmul_n",) if h.get("matmul_n") is not None else ()):
        if not _int(h.get(key)) or h[key] < 1:
            raise ValueError(f"health.{key} must be an integer >= 1, got {h.get(key)!r}")
    scripts = h.get("site_checks") or []
    if not isinstance(scripts, (list, tuple)) or not all(isinstance(s, str) and s for s in scripts):
        raise ValueError(f"health.site_checks must be a list of script paths, got {scripts!r}")
    h["site_checks"] = list(scripts)
    return h
