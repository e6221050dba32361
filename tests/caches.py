"""Where the tests keep what outlives a run (the test image, JAX's compiled programs): outside the
clone, beside the framework environments (mk/build_env.sh keeps the same rule for those).
What is kept is keyed by its content, so a fresh clone reuses it and a change misses it."""
import os
from pathlib import Path


def cache_root() -> Path:
    """/var/cache/dlbench as root, else the user's cache ($XDG_CACHE_HOME or ~/.cache)/dlbench."""
    if os.getuid() == 0:
        return Path("/var/cache/dlbench")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dlbench"
