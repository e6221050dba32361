import contextlib
import fcntl
import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The local Slurm cluster fixture (tests/integration/conftest_slurm.py).
pytest_plugins = ["tests.integration.conftest_slurm"]


NO_SLURM_CONF = "/nonexistent/dlbench-no-cluster/slurm.conf"
SLURM_FIXTURES = ("slurm_cluster", "test_image")
SHARED_SWEEPS = "sweeps"   # tests/frameworks_env.py: one sweep per framework and case, shared
GROUPS_KEY, LOCK_KEY = "dlbench_groups", "dlbench_lock"
# `make test` runs one worker per core and one more (Makefile: WORKERS): the Slurm test
# cluster's tests mostly wait (on the controller, on node timeouts: about a sixth of a core
# over their 11 minutes), so one worker takes them, and the other tests share a CPU slot per
# core, one test each. One slot more made it slower (docs/development.md): the tests' own
# subprocesses keep the cores busy.
CPU_SLOTS = len(os.sched_getaffinity(0))   # the cores this process may use: `nproc`'s count


def group_of(item) -> str:
    """Which tests go together on one worker under `make test` (pytest-xdist, `-n WORKERS --dist
    loadscope`): every test of a Slurm test cluster (one per machine: they share it, one after
    another), the tests of one framework's shared sweeps (a session fixture: each sweep runs
    once, and two frameworks' sweeps run on two workers side by side), and each other module
    whole (its module fixtures run once)."""
    names = getattr(item, "fixturenames", ())
    if item.get_closest_marker("slurm") or any(f in names for f in SLURM_FIXTURES):
        return "slurm"
    framework = getattr(getattr(item, "callspec", None), "params", {}).get("fw") \
        or getattr(getattr(item, "module", None), "NAME", None)
    if SHARED_SWEEPS in names and framework:
        return f"framework-sweeps-{framework}"
    return item.nodeid.split("::")[0]


# pytest-xdist's own groups (`xdist_group`, --dist loadgroup) rename the node ids, which pytest
# 9 no longer lets it do: each worker writes what group_of says of its tests to a file the
# controller named, and the controller's scheduler reads its scopes from there.
def _groups_file(worker: str) -> str:
    return os.path.join(tempfile.gettempdir(), f"dlbench-test-groups-{os.getpid()}-{worker}.json")


def _lock_file() -> str:
    return os.path.join(tempfile.gettempdir(), f"dlbench-tests-{os.getpid()}.lock")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput[GROUPS_KEY] = _groups_file(node.gateway.id)
    node.workerinput[LOCK_KEY] = _lock_file()


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):   # the controller, or a run without xdist
        for path in (_lock_file() + ".gate",
                     *(f"{_lock_file()}.slot{i}" for i in range(CPU_SLOTS))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling
    config.option.loadscopereorder = False   # the workers' order (longest_first), not by count

    class Groups(LoadScopeScheduling):
        groups = None

        def _split_scope(self, nodeid):
            if self.groups is None:   # the workers collected the same tests: any one's file
                self.groups = {}
                for path in glob.glob(_groups_file("*")):
                    with open(path) as f:
                        self.groups.update(json.load(f))
                    os.unlink(path)
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return Groups(config, log)


def longest_first(items: list, group: dict) -> list:
    """The order the workers take the groups in (`group`: node id -> group_of): the Slurm test
    clusters' first (one long chain of waits), then the integration tests' (real ranks), then
    the unit tests' (many short ones, which fill the cores at the end instead of one long test
    alone); the larger group first within each, and each group's tests in their own order."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(group[item.nodeid], []).append(item)

    def rank(group: str) -> tuple:
        return (group != "slurm", group.startswith("tests/unit/"), -len(groups[group]))

    return [item for group in sorted(groups, key=rank) for item in groups[group]]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    where = getattr(config, "workerinput", {}).get(GROUPS_KEY)
    if where:
        group = {item.nodeid: group_of(item) for item in items}
        items[:] = longest_first(items, group)
        with open(where + ".part", "w") as f:
            json.dump(group, f)
        os.replace(where + ".part", where)


def quiet_slots() -> range:
    """The CPU slots a `quiet` test holds: all but one, so that one other test runs beside it,
    behind the test cluster's ranks (tests/slurm_cluster: its daemons and ranks run at a
    higher priority); all of them where there is only one."""
    return range(max(1, CPU_SLOTS - 1))


@contextlib.contextmanager
def cpu_slots(where: str, item):
    """The CPU slots a test holds while it runs (CPU_SLOTS's comment): none for the Slurm test
    cluster's, quiet_slots for a quiet one, else the first free one, waited for. A gate first:
    a quiet test waiting for its slots is not passed by the other workers' next tests."""
    quiet = item.get_closest_marker("quiet") is not None
    if group_of(item) == "slurm" and not quiet:
        yield
        return
    with contextlib.ExitStack() as held:
        gate = held.enter_context(open(where + ".gate", "a"))
        if quiet:
            fcntl.flock(gate, fcntl.LOCK_EX)
            for i in quiet_slots():
                fcntl.flock(held.enter_context(open(f"{where}.slot{i}", "a")), fcntl.LOCK_EX)
            fcntl.flock(gate, fcntl.LOCK_UN)
            yield
            return
        fcntl.flock(gate, fcntl.LOCK_SH)
        fcntl.flock(gate, fcntl.LOCK_UN)
        while True:
            for i in range(CPU_SLOTS):
                with open(f"{where}.slot{i}", "a") as slot:
                    try:
                        fcntl.flock(slot, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue
                    yield   # the lock ends with the file's close
                    return
            time.sleep(0.2)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under `make test`'s workers, each test holds its CPU slots (cpu_slots) from its setup
    (its module's fixtures included) to its teardown. A test marked `quiet` (it tells a slow
    node from a healthy one by timing links) shares the machine with one other test only."""
    where = getattr(item.config, "workerinput", {}).get(LOCK_KEY)
    if where is None:
        return (yield)
    with cpu_slots(where, item):
        return (yield)


@pytest.fixture(scope="module", autouse=True)
def no_slurm_unless_the_module_uses_it(request):
    """launcher=auto, the default, picks Slurm wherever SLURM_CONF leads to a controller,
    and the `slurm_cluster` fixture exports it for the rest of the session. A module none
    of whose tests use the test cluster runs as on a machine without one: SLURM_CONF names
    no file, so its `python -m launch` runs locally, as written."""
    from launchers import auto
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
def jax_compilation_cache():
    """JAX ranks share one persistent compilation cache, kept between runs (tests/caches.py).
    Un-jitted JAX compiles every primitive on first use: a smoke ResNet-50 point spent 26 s of
    CPU with a cold cache and 9 s with a warm one, and a session's points are mostly programs
    an earlier run compiled. JAX keys an entry by the program, its version and its flags, so a
    change compiles afresh; a cold cache costs what a session-long one did. Its key also holds
    the folder's own path (XLA's autotune cache beside it, in the compile options): entries
    copied to another folder miss. What a cached compile saves is warm-up time, never a timed
    step. A cache already set is kept."""
    from tests.caches import cache_root
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JAX_COMPILATION_CACHE_DIR", str(cache_root() / "jax-compile"))
        mp.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # default 1 s: none here
        yield


@pytest.fixture(scope="session", autouse=True)
def one_thread_a_rank():
    """Every rank the tests start runs one OpenMP thread (the local launcher's default is the
    cores over the ranks: 2 for a lone rank here). The tests' ranks share 2 cores with the
    other tests' ranks, where a second thread mostly waits on the first: a lone PyTorch rank's
    smoke steps took some ten times a 2-rank point's. A value already set is kept."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS") or "1")
        yield


@pytest.fixture(scope="session", autouse=True)
def results_store_of_the_session(tmp_path_factory):
    """Every report a test runs adds its sweep to a results store (analysis/store/database.py): one
    of the session's own, never the user's (~/.local/share/dlbench). A test of the store
    sets its own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLBENCH_STORE", str(tmp_path_factory.mktemp("store") / "results.sqlite"))
        yield
