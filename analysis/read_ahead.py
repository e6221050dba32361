"""Rank records read ahead by a second process while analysis.load reads the others.

`ReadAhead(pool, paths)` hands the records to a worker (a concurrent.futures executor with
one process: the report's, analysis/helper_process.py) in chunks, from the last chunk back,
while this process reads from the first; the two meet in the middle. `take(path)` gives a
record the worker parsed (waiting for its chunk if the worker has started it), or None when
this process should read it: its chunk was not started (it is cancelled and read here), or
the worker died. A record comes back as record_file.rank_record returns it, or as its
CorruptFile: the same result whichever process read it.

Worth it at scale only: under MIN_FILES records everything is read here.
"""
import concurrent.futures

from analysis import record_file
from analysis.record_file import CorruptFile

CHUNK = 32          # records a task: a few tens of ms, so neither side waits long
MIN_FILES = 4 * CHUNK


def parse(paths) -> list:
    """Each rank record of `paths`: (record without steps, step columns) or CorruptFile."""
    out = []
    for path in paths:
        try:
            out.append(record_file.rank_record(path))
        except CorruptFile as exc:
            out.append(exc)
    return out


class ReadAhead:
    def __init__(self, pool, paths):
        self._where, self._done = {}, {}
        if pool is None or len(paths) < MIN_FILES:
            return
        chunks = [paths[i:i + CHUNK] for i in range(0, len(paths), CHUNK)]
        try:
            for chunk in reversed(chunks[1:]):     # the first chunk is this process's at once
                future = pool.submit(parse, chunk)
                self._where.update((p, (future, chunk)) for p in chunk)
        except RuntimeError:   # the pool is broken or shut down: read everything here
            self.close()

    def take(self, path):
        """The record of `path` as the worker read it, or None: read it here."""
        if path in self._done:
            return self._done.pop(path)
        future, chunk = self._where.get(path, (None, ()))
        if future is None:
            return None
        for p in chunk:
            del self._where[p]
        if future.cancel():    # not started: this process reads the chunk
            return None
        try:
            self._done.update(zip(chunk, future.result()))
        except concurrent.futures.process.BrokenProcessPool:
            return None        # the worker died: the rest is read here
        return self._done.pop(path)

    def close(self) -> None:
        """Cancel what the worker has not started (a load that ended early)."""
        for future, _ in self._where.values():
            future.cancel()
        self._where.clear()
