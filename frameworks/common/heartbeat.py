"""Rank 0's heartbeat while it trains (contract/heartbeat.py: the file and its layout).

The loop only bumps an int (`beat.done += 1`, tens of nanoseconds); a daemon thread of rank 0
wakes every BEAT_S, reads it and writes the file whole. No file I/O in the loop, inside the
timed window or out (its cost, measured nil: benchmarks/heartbeat_cost.md). Other ranks
bump the same int and start no thread, so every rank's loop is the same.
"""
import os
import threading
import time

from contract import heartbeat, paths


class Beat:
    def __init__(self, point_dir, repeat: int, steps: int):
        self.done = 0          # steps done: the loop's one touch
        self.phase = "warmup"  # set at the window's edges
        self._where = (point_dir, repeat, steps)
        self._started = time.time()
        self._stop = threading.Event()
        self._thread = None
        if point_dir is not None:
            self._thread = _started(threading.Thread(target=self._run, name="dlbench-heartbeat",
                                                     daemon=True))

    def _write(self, phase=None) -> None:
        point_dir, repeat, steps = self._where
        try:
            heartbeat.beat(point_dir, repeat, self.done, steps, phase or self.phase, self._started)
        except OSError:  # a progress report, never worth a run
            pass

    def _run(self) -> None:
        self._write()
        while not self._stop.wait(heartbeat.BEAT_S):
            self._write()

    def stop(self) -> None:
        """The loop's end: the thread stops and the last heartbeat says `done`."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._write("done")


STACK_BYTES = 256 * 1024   # the thread's stack: small, since under memory_limit_mb it counts


def _started(thread):
    """`thread` started on a small stack, or None where it cannot start (under the harness's
    memory cap, RLIMIT_AS, near its limit): a progress report is never worth a run, and the
    run then ends as its memory says, not as a thread's start did."""
    old = threading.stack_size(STACK_BYTES)
    try:
        thread.start()
    except RuntimeError:   # "can't start new thread"
        return None
    finally:
        threading.stack_size(old)
    return thread


def start(spec, rank: int) -> Beat:
    """Rank 0's beat (its thread writing the point's heartbeat), or another rank's (no thread)."""
    steps = spec.warmup_steps + spec.measure_steps
    point_dir = os.path.dirname(paths.heartbeat_file(spec.record_dir)) if rank == 0 else None
    return Beat(point_dir, spec.repeat, steps)
