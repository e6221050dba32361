"""The `health.*` settings (conf/config.yaml, docs/health.md) before they are checked: bad
input is one line (a ValueError, which the planner turns into its ConfigError), never a
health step that fails later. Each setting's type and bounds are declared once on the typed
point (contract/point.py, Health and Expect) and checked there; what is left here is what a
declaration cannot say: `checks` is `all`, a name or a list of healthchecks/nodechecks.py's
names, and `site_checks` is a list of script paths."""
from healthchecks import nodechecks


def settings(health) -> dict:
    """The resolved health node (a dict) -> a plain dict with `checks` as the list of check
    names; its other keys are checked by their declaration (contract/typed.py)."""
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
    scripts = h.get("site_checks") or []
    if not isinstance(scripts, (list, tuple)) or not all(isinstance(s, str) and s for s in scripts):
        raise ValueError(f"health.site_checks must be a list of script paths, got {scripts!r}")
    h["site_checks"] = list(scripts)
    return h
