"""Each test's wall time and CPU time, one JSON line a test, for measuring `make test`
(docs/development.md, "make test's time"); off unless asked for:

    CPU_ACCOUNT=/tmp/cpu.jsonl PYTEST_ADDOPTS="-p tests.cpu_account" make test

CPU is the worker's user and system time and its waited-for children's (resource.getrusage):
a rank Slurm's daemons start is not counted."""
import json
import os
import resource
import time

import pytest


def _cpu() -> tuple:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own0, children0 = _cpu()
    t0 = time.monotonic()
    try:
        return (yield)
    finally:
        own1, children1 = _cpu()
        with open(os.environ.get("CPU_ACCOUNT", "cpu_account.jsonl"), "a") as f:
            f.write(json.dumps({"id": item.nodeid, "wall": time.monotonic() - t0, "self": own1 - own0,
                                "children": children1 - children0,
                                "worker": os.environ.get("PYTEST_XDIST_WORKER"), "end": time.time()}) + "\n")
