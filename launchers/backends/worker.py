"""The worker as every backend starts it: its command and its environment (docs/contract.md)."""
import os
import sys

from contract import paths
from launchers.suite import ROOT, ConfigError


class WorkerUnavailable(RuntimeError):
    """The framework's interpreter is not there: the repeat fails with this message."""


def worker_argv(point, spec_path: str, python: str) -> list:
    """The worker command: the framework's interpreter (or `python`) running the harness.

    A relative interpreter path is taken from the repository root (`.venvs/<name>`)."""
    fw = point.framework
    if fw.python:
        python = str(ROOT / fw.python)
        if not os.path.exists(python) and not fw.container:
            raise WorkerUnavailable(f"{fw.name} interpreter {fw.python} not found{_builder(fw.python)}")
        if os.path.isfile(python) and not os.access(python, os.X_OK):
            raise WorkerUnavailable(f"{fw.name} interpreter {fw.python} is not executable")
    return [python, "-m", "frameworks", "--spec", spec_path]


def _builder(python: str) -> str:
    """What builds an interpreter of the suite's own: `.venvs/<env>/...` is `make env-<env>`
    where the Makefile has that target (mk/frameworks.mk, mk/versions.mk), else nothing."""
    parts = os.path.normpath(python).split(os.sep)
    if len(parts) > 2 and parts[0] == ".venvs" and any(
            os.path.exists(os.path.join(ROOT, folder, parts[1], "requirements.txt"))
            for folder in ("frameworks", os.path.join("tests", "versions"))):
        return f" (make env-{parts[1]} builds it)"
    return ""


def require(point) -> None:
    """ConfigError, in one line naming what builds it, where the point's framework interpreter
    is not here or not executable: checked for every point before any runs or is queued."""
    try:
        worker_argv(point, paths.SPEC_FILE, sys.executable)
    except WorkerUnavailable as exc:
        raise ConfigError(str(exc)) from None


def rank_environ(base, drop, additions: dict) -> dict:
    """A rank's environment, as each backend builds it: `base` (os.environ when None)
    without the variables `drop(name)` is true of, plus the backend's `additions`;
    PYTHONPATH leads to the suite, then whatever PYTHONPATH was there."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not drop(k)}
    env.update(additions)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env
