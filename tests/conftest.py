import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The local Slurm cluster fixture (tests/integration/conftest_slurm.py).
pytest_plugins = ["tests.integration.conftest_slurm"]


NO_SLURM_CONF = "/nonexistent/dlbench-no-cluster/slurm.conf"


@pytest.fixture(scope="module", autouse=True)
def no_slurm_unless_the_module_uses_it(request):
    """launcher=auto, the default, picks Slurm wherever SLURM_CONF leads to a controller,
    and the `slurm_cluster` fixture exports it for the rest of the session. A module none
    of whose tests use the test cluster runs as on a machine without one: SLURM_CONF names
    no file, so its `python -m launch` runs locally, as written."""
    from launchers.backends import auto
    mine = [item for item in request.session.items if getattr(item, "module", None) is request.module]
    auto.choose.cache_clear()
    if any("slurm_cluster" in item.fixturenames for item in mine):
        yield
    else:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("SLURM_CONF", NO_SLURM_CONF)
            yield
    auto.choose.cache_clear()


@pytest.fixture(scope="session", autouse=True)
def jax_compilation_cache(tmp_path_factory):
    """JAX ranks share one persistent compilation cache for the session. Un-jitted JAX
    compiles every primitive on first use (about 25 s of a tiny ResNet's first step here),
    and many test points run the same programs again; what a cached compile saves is
    warm-up time, never a timed step. A cache already set in the environment is kept."""
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path_factory.mktemp("jax-cache")))
        mp.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # default 1 s: none here
        yield


@pytest.fixture(scope="session", autouse=True)
def results_store_of_the_session(tmp_path_factory):
    """Every report a test runs adds its sweep to a results store (analysis/store.py): one
    of the session's own, never the user's (~/.local/share/dlbench). A test of the store
    sets its own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLBENCH_STORE", str(tmp_path_factory.mktemp("store") / "results.sqlite"))
        yield
