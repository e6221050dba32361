"""A running repeat's progress, shown by the process that waits on its ranks (the local
launcher, or a Slurm allocation's driver): rank 0's heartbeat (contract/heartbeat.py) read
every POLL_S by a thread of this process, drawn as a bar on a terminal (stderr a tty), else
logged as a line when the repeat's first heartbeat is seen and every LINE_EVERY_S after.
"""
import contextlib
import sys
import threading
import time

from contract import heartbeat

POLL_S = 0.5
LINE_EVERY_S = 10.0
BAR_WIDTH = 24


def bar(hb: dict, repeats: int, width: int = BAR_WIDTH) -> str:
    """'[######..................] ' and the progress line: this repeat's steps as a bar."""
    fill = int(width * min(1.0, int(hb["step"]) / max(1, int(hb["steps"]))))
    return f"[{'#' * fill}{'.' * (width - fill)}] {heartbeat.progress_line(hb, repeats)}"


@contextlib.contextmanager
def shown(point, repeat: int, log=print, stream=None):
    """While the block runs repeat `repeat` of `point`, show its progress."""
    stream = sys.stderr if stream is None else stream
    tty = stream.isatty()
    stop = threading.Event()

    def watch():
        last_line = None
        while not stop.wait(POLL_S):
            hb = heartbeat.read(point.dir)
            if hb is None or hb["repeat"] != repeat or not heartbeat.live(hb):
                continue
            if tty:
                print(f"\r{point.name} {bar(hb, point.repeats)}\033[K", end="", file=stream, flush=True)
            elif last_line is None or time.monotonic() - last_line >= LINE_EVERY_S:
                log(f"{point.name} {heartbeat.progress_line(hb, point.repeats)}")
                last_line = time.monotonic()

    thread = threading.Thread(target=watch, name="dlbench-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if tty:
            print("\r\033[K", end="", file=stream, flush=True)
