"""How the process that owns ranks is stopped, and its ranks with it: one rule for the local
launcher and the Slurm driver (docs/statuses.md, "Stopping a launcher").

- SIGINT, SIGTERM, SIGHUP (Ctrl-C; `timeout`, a CI runner, systemd, Slurm ending the
  allocation; a closed terminal): the owner's handlers (`owner()` around what the local
  launcher runs, `install()` for the Slurm driver's life) note the first (`received()`).
  The step runner (launchers/backends/step.py) sees it at its next look and stops the step
  by its one rule: SIGTERM to the ranks, step.TERM_S, SIGKILL. A second signal kills the
  running step's ranks at once (`watching`). The repeat loop (launchers/driver/repeats.py)
  then records the repeat `cancelled`, with the signal as its cause (`cause()`), and raises
  `Stopped`; the launcher exits 128 + the signal's number: 130, 143, 129. A cancelled
  repeat is not done: a rerun into the folder runs it again (contract/statuses.py `final`).
  On Slurm the signal is the allocation ending (scancel, preemption, requeue): Slurm is
  signalling the ranks itself, the stop is quick, and the repeat is set aside unrecorded for
  the requeued job (launchers/backends/slurm/allocation.py).
- SIGKILL: nothing runs in the owner. Each rank it starts asks the kernel for SIGKILL when
  its parent ends (contract/owner.py `die_with_owner`, the rank's preexec_fn: prctl
  PR_SET_PDEATHSIG); a forked local rank asks it of its forkserver, which asks it of the
  owner (launchers/backends/forked.py). The signal follows the thread that started the rank,
  which is the one that waits on it in the step runner.
"""
import contextlib
import os
import signal
import sys
import threading

from contract import exits

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """The owner got a stop signal: no more steps; it exits with `code` (128 + the signal)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name
        self.code = exits.interrupted(name)


class _State:
    got: list = []          # the stop signals received, by name, in order
    kill = None       # kills the step running now: what a second signal does
    who = "the launcher"
    ttys: list = []         # stdout and stderr where they are a terminal
    log = print
    what = "stopping"


def _on_signal(signum, frame):
    name = signal.Signals(signum).name
    _State.got.append(name)
    if signum == signal.SIGHUP:
        _off_the_terminal()
    if len(_State.got) == 1:
        _State.log(f"got {name}: {_State.what}")
    elif _State.kill is not None:
        _State.log(f"got {name} again: killing the ranks at once")
        _State.kill()
    else:  # no step to stop: the owner stops where it is
        raise Stopped(_State.got[0])


def _terminals() -> list:
    """The output descriptors on a terminal, found while there is one (a hung-up terminal
    no longer says it is one)."""
    out = []
    for stream in (sys.stdout, sys.stderr):
        try:
            if os.isatty(stream.fileno()):
                out.append(stream.fileno())
        except (OSError, ValueError, AttributeError):  # no file behind it
            pass
    return out


def _off_the_terminal() -> None:
    """After a hangup the terminal is gone and writing to it fails (EIO): what this process
    still says goes nowhere instead, as under nohup; a file or a pipe keeps it."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in _State.ttys:
        os.dup2(devnull, fd)
    os.close(devnull)


def install(log=print, who: str = "the launcher", what: str | None = None) -> dict:
    """Handle the stop signals in this process from now on -> the handlers they replace.
    Only the main thread can (Python's rule); elsewhere nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    _State.got, _State.kill, _State.who, _State.log = [], None, who, log
    _State.ttys = _terminals()
    _State.what = what or ("stopping the ranks (SIGTERM, then SIGKILL); again to kill "
                           "them at once")
    return {s: signal.signal(s, _on_signal) for s in SIGNALS}


@contextlib.contextmanager
def owner(log=print, who: str = "the launcher"):
    """While the body runs ranks, the stop signals stop them; a Stopped that ends the body
    becomes one line on stderr and exit status 128 + the signal's number."""
    previous = install(log, who)
    try:
        yield
    except Stopped as stop:
        print(f"{who}: stopped by {stop.name}; what is recorded is kept, and the same command "
              "runs the rest (a cancelled repeat again)", file=sys.stderr, flush=True)
        raise SystemExit(stop.code) from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _State.got, _State.kill = [], None


def received():
    """The first stop signal this owner got ('SIGINT'), or None."""
    return _State.got[0] if _State.got else None


def cause() -> str:
    """The stop in words, for a cancelled repeat's error: 'SIGINT to the launcher'."""
    name = received()
    text = f"{name} to {_State.who}"
    return text + (", twice: its ranks killed at once" if len(_State.got) > 1 else "")


def check() -> None:
    """Raise Stopped if a stop signal came: no next step."""
    if _State.got:
        raise Stopped(_State.got[0])


@contextlib.contextmanager
def watching(kill):
    """While a step runs: `kill()` kills its ranks at once, as a second signal asks."""
    before, _State.kill = _State.kill, kill
    try:
        yield
    finally:
        _State.kill = before
