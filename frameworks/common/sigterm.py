"""SIGTERM to a rank (its launcher's stop, Slurm's cancel or time limit): the rank ends within
GIVE_UP_S, its record saying `cancelled`, whole or not at all (docs/statuses.md).

Python runs a signal's handler only between two bytecodes of the main thread, so a step
inside a framework's C code (a kernel, a collective, minutes of them on a CPU) would keep
the `Cancelled` the handler raises waiting for as long as the step lasts, past the
launcher's grace. The C-level handler also wakes a watcher thread (signal.set_wakeup_fd);
if the process still runs GIVE_UP_S later, the watcher saves the record as it stands,
`cancelled`, unless the main thread saved it first, and ends the process. One save at a
time (`save`): the record is written once, whole. A framework op that holds the GIL all
that while leaves the watcher no turn: the launcher's SIGKILL ends that rank, and the
repeat's run.json still says why. Standard library only: this runs in the framework's Python.
"""
import json
import os
import signal
import sys
import threading
import time

from contract import records
from contract.statuses import Cancelled

# Less than the launcher's wait between SIGTERM and SIGKILL (launchers/backends/step.py
# TERM_S, 10 s) and than Slurm's KillWait (30 s by default; 5 s on the test cluster).
GIVE_UP_S = 3.0


class _State:
    received = False         # SIGTERM came (the Python handler ran)
    lock = threading.Lock()  # one save at a time; the watcher's is the process's last act
    pending: tuple[dict, str] | None = None  # (record, path): what the watcher saves if it gives up
    saving = False           # the main thread is saving (or has saved) the record
    code = 1                 # the exit status when the watcher ends the process
    doing = "the session's setup"  # what the watcher's record says had not returned


def install() -> None:
    """SIGTERM raises Cancelled in the main thread and starts the watcher's count (call from
    the main thread, before the framework is imported)."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read,), name="dlbench-sigterm", daemon=True).start()


def reclaim() -> None:
    """Take SIGTERM back from a framework that set a C handler of its own while its session
    was built (TensorFlow's preemption notifier, with MultiWorkerMirroredStrategy: it notes
    the signal and nothing ends). Python's signal.signal sets its C handler anew."""
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum, frame):
    _State.received = True
    if not _State.saving:  # a record being saved is left to finish
        raise Cancelled("terminated by SIGTERM")


def received() -> bool:
    """Whether this rank got SIGTERM: whatever error it then ends with is the stop's (the
    Cancelled raised inside a framework's own exception handling comes out as another: seen
    with TensorFlow, "pybind11::error_already_set: MISMATCH ... REPLACED BY Cancelled"; a peer
    gone under the same stop breaks a collective)."""
    return _State.received


def _watch(fd: int) -> None:
    while signal.SIGTERM not in os.read(fd, 512):  # one byte per signal: its number
        pass
    time.sleep(GIVE_UP_S)
    give_up()


def pending(record: dict, path: str) -> None:
    """The record the watcher saves if the rank must end before the main thread can."""
    _State.pending = (record, path)


def doing(what: str) -> None:
    """What the rank does from now on, as the watcher's record names it: "the session's
    setup" until its session is built, then "the step in progress". A stop during the setup
    can leave a rank in a rendezvous's or a first collective's C code, waiting on a peer that
    the same stop ended."""
    _State.doing = what


def save(path: str, record: dict) -> None:
    """The main thread's save: whole, and never beside the watcher's."""
    _State.saving = True
    with _State.lock:
        records.write_json_atomic(path, record)
    _State.code = 0 if record.get("status") == "ok" else 1


def leave(code: int) -> None:
    """End a stopped rank whose record is saved, without its session's teardown. A peer may
    still be inside the step the stop cut short: PyTorch's teardown (a gloo barrier before
    the group's end) would wait for it until the peer's own watcher gave up, GIVE_UP_S later,
    and the peer's record would then blame its step for what was this rank's wait."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def give_up() -> None:
    """SIGTERM came GIVE_UP_S ago and the process still runs: save the record as it stands,
    `cancelled`, if the main thread has not begun to, and end the process."""
    _State.lock.acquire()  # never released: the process ends here
    if _State.pending is not None and not _State.saving:
        record, path = _State.pending
        try:
            # a copy in one go (the C encoder: no other thread runs meanwhile), then written
            record = json.loads(json.dumps(record, default=str))
            record.update(status="cancelled", ended_unix=time.time(),
                          error=f"Cancelled: terminated by SIGTERM; {_State.doing} had "
                                f"not returned {GIVE_UP_S:g} s later")
            records.write_json_atomic(path, record)
        except Exception as exc:  # noqa: BLE001  (no record then: the launcher says why)
            print(f"worker: could not save the record: {exc}", file=sys.stderr)
    print(f"worker: still running {GIVE_UP_S:g} s after SIGTERM; exiting", file=sys.stderr)
    sys.stderr.flush()
    os._exit(_State.code)
