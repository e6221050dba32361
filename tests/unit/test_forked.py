"""Which local ranks are forked from a forkserver (launchers/backends/forked.py): the suite's
own interpreter running the worker, of a framework with preloads, outside a container, on this
machine's CPU; never where a GPU would be used (CUDA does not survive a fork)."""
import sys
from types import SimpleNamespace

from launchers import auto
from launchers.backends import forked


def point(framework="pytorch", device="auto", container=None, forkserver=True):
    return SimpleNamespace(framework=SimpleNamespace(name=framework, container=container), device=device,
                           launcher=SimpleNamespace(forkserver=forkserver))


def argv(python=sys.executable):
    return [python, "-m", "frameworks", "--spec", "/sweep/points/p/repeat-00/spec.json"]


def test_pytorch_on_this_cpu_is_forked(monkeypatch):
    monkeypatch.setattr(auto, "gpu_visible", lambda: False)
    assert forked.forkable(point(), argv())
    assert forked.forkable(point(device="cpu"), argv())


def test_never_where_a_gpu_would_be_used(monkeypatch):
    monkeypatch.setattr(auto, "gpu_visible", lambda: True)
    assert not forked.forkable(point(), argv())           # auto on a GPU machine
    assert not forked.forkable(point(device="cuda"), argv())
    assert forked.forkable(point(device="cpu"), argv())   # asked for the CPU: no CUDA touched


def test_another_interpreter_a_container_no_preloads_or_asked_not_to_start_whole(monkeypatch):
    monkeypatch.setattr(auto, "gpu_visible", lambda: False)
    assert not forked.forkable(point(), argv("/opt/torch-2.11/bin/python"))
    assert not forked.forkable(point(container="/images/pytorch.sqsh"), argv())
    assert not forked.forkable(point(framework="jax"), argv())
    assert not forked.forkable(point(forkserver=False), argv())  # launcher.forkserver=false
    assert not forked.forkable(point(), [sys.executable, "-m", "launchers.health.step", "--spec", "s"])


def test_one_server_per_environment_but_the_ranks_own_variables(monkeypatch):
    made = []

    class Recording:  # a server that forks nothing: which environments get one is the question
        refused = None

        def __init__(self, python, framework, env, log):
            made.append(env)

        def start(self, argv, env, log):
            return env["RANK"]

        def close(self):
            pass

    monkeypatch.setattr(forked, "Server", Recording)
    monkeypatch.setattr(auto, "gpu_visible", lambda: False)
    shared = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "1"}
    with forked.Servers() as servers:
        for rank, port, world in ((0, 29500, 2), (1, 29500, 2), (0, 29600, 4)):
            env = dict(shared, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            assert servers.start(point(), argv(), env, "rank.log") == str(rank)
        assert servers.start(point(), argv(), dict(shared, OMP_NUM_THREADS="2", RANK="0"), "log") == "0"
    assert made == [shared, dict(shared, OMP_NUM_THREADS="2")]  # no rank's own variable in one
    assert servers.start(point(), argv(), dict(shared, RANK="0"), "log") is None  # closed: none
