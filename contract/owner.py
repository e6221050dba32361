"""A process started by an owner dies with it: the one rule for the local launcher's ranks
and forkservers (launchers/backends/), the tests' probes, and a forkserver's forked ranks
(frameworks/common/forkserver.py). Standard library only: the forkserver runs in the
framework's Python.

The child asks the kernel for SIGKILL when its parent ends (prctl PR_SET_PDEATHSIG); an owner
gone already (before the prctl) kills it at once. The signal follows the thread that started
the child; a set-user-ID interpreter would clear it (none here).
"""
import ctypes
import functools
import os
import signal
from typing import Any, Callable, Optional

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@functools.lru_cache(maxsize=None)
def _prctl() -> Optional[Callable[..., Any]]:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no parent-death signal
        return None


def die_with_owner() -> Optional[Callable[[], None]]:
    """What the child runs between fork and exec (a preexec_fn; a forked rank calls it itself):
    SIGKILL to it when this process, its owner, ends, however it ends. None where the kernel has
    no parent-death signal."""
    prctl = _prctl()
    if prctl is None:
        return None
    owner_pid = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != owner_pid:
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec
