"""What every part of launchers/ shares about the suite itself: where its checkout is, which
commit it is at, and how bad input is refused. The planner (plan/), the backends (backends/)
and the driver (driver/) all import it; it imports none of them.

    ROOT          the checkout: ranks run from it, a relative interpreter (.venvs/<name>/...)
                  is taken from it, conf/ is in it
    ConfigError   bad input, said in one line (exit status 2 at the command line)
    commit()      the suite's git commit, marked dirty when the tree has changes
"""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """Bad input, said in one line."""


def commit() -> str | None:
    """The suite's git commit, marked dirty when the tree has changes; None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None
