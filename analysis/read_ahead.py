"""A sweep's rank records read by two processes: analysis/load.py asks for them in its own
order, and a second process, forked for it, reads ahead of it.

The records are dealt in chunks of CHUNK, in order, to whichever process claims the next
one first, never more than AHEAD chunks past the one being asked for (so that what was read
ahead and not yet used stays small). `Ahead(paths)` forks the second process and returns at
once; `take(path)` is record_file.rank_record(path): the record without its steps and its
step columns, or the CorruptFile that says why not. A path of a chunk this process claimed is
read here when asked for; one of a chunk the second process claimed comes from it (it sends
each chunk's records, and their steps as one set of columns, pickled), and while it has not
come this process reads the next unclaimed chunk itself, so that neither waits on the other
while there is work. What a record says is the same whichever process read it. Where no
process can be forked, or for few bytes, the caller reads every record itself (`worth`).

Forked, not spawned: the child has the parent's imports (a fresh interpreter would import
pandas again), and it only reads files, pickles and exits.
"""
import multiprocessing
import os
import time

import numpy as np

from analysis import record_file
from analysis.record_file import CorruptFile

MIN_BYTES = 16 << 20   # less than this is read faster than a second process starts and pays back
CHUNK = 8              # records a process claims at a time
AHEAD = 8              # chunks either may claim past the one asked for
FREE, MINE, THEIRS = 0, 1, 2   # a chunk's owner, in the shared table


def worth(total_bytes: int) -> bool:
    return total_bytes >= MIN_BYTES and "fork" in multiprocessing.get_all_start_methods()


class Ahead:
    def __init__(self, paths):
        ctx = multiprocessing.get_context("fork")
        self.paths = list(paths)
        self.index = {p: i for i, p in enumerate(self.paths)}
        chunks = -(-len(self.paths) // CHUNK)
        self._owner = ctx.RawArray("b", chunks)   # FREE, MINE or THEIRS per chunk
        self._asked = ctx.RawValue("q", 0)       # the chunk asked for last: the window's start
        self._lock = ctx.Lock()
        self._got = {}           # index -> (slim, columns) or a CorruptFile, read ahead
        self._finished = False   # the second process has sent all it will
        self._conn, child = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(self.paths, self._owner, self._asked,
                                                      self._lock, child), daemon=True)
        self._proc.start()
        child.close()

    def take(self, path):
        i = self.index.get(path)
        if i is None:          # not among the paths: read here
            return record_file.rank_record(path)
        c = i // CHUNK
        self._asked.value = max(self._asked.value, c)
        while i not in self._got:
            with self._lock:
                owner = self._owner[c]
                if owner == FREE:
                    self._owner[c] = owner = MINE
            if owner == MINE:
                self._drain()
                return record_file.rank_record(path)
            # the second process's chunk: what it has sent, else the next free chunk here
            self._drain()
            if i in self._got or self._finished:
                break
            ahead = self._claim(c)
            if ahead is not None:
                self._read(ahead)
            else:
                self._receive()    # nothing else to do: wait for it
        got = self._got.pop(i, None)
        if got is None:            # the second process ended without it
            return record_file.rank_record(path)
        if isinstance(got, CorruptFile):
            raise got
        return got

    def _claim(self, c):
        """The first free chunk in the window past c, claimed here; None if none."""
        with self._lock:
            for d in range(c + 1, min(c + 1 + AHEAD, len(self._owner))):
                if self._owner[d] == FREE:
                    self._owner[d] = MINE
                    return d
        return None

    def _read(self, chunk) -> None:
        for i in range(chunk * CHUNK, min(len(self.paths), (chunk + 1) * CHUNK)):
            try:
                self._got[i] = record_file.rank_record(self.paths[i])
            except CorruptFile as exc:
                self._got[i] = exc

    def _drain(self) -> None:
        """Whatever the second process has sent so far (so that it never waits on a full pipe)."""
        while not self._finished and self._conn.poll():
            self._receive()

    def _receive(self) -> None:
        try:
            message = self._conn.recv()
        except EOFError:     # it died: what it claimed and did not send is read here
            message = None
        if message is None:
            self._finished = True
            return
        entries, columns = message
        at = 0
        for i, kind, payload in entries:
            if kind == "bad":
                self._got[i] = CorruptFile(*payload)
            else:
                n = payload[1]
                self._got[i] = (payload[0], {k: v[at:at + n] for k, v in columns.items()})
                at += n

    def close(self) -> None:
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join()
        self._conn.close()


def _child(paths, owner, asked, lock, conn) -> None:
    """The second process: claims the first free chunk of the window and sends what it read."""
    status = 0
    try:
        while True:
            with lock:
                start = asked.value
                free = [d for d in range(start, min(start + 1 + AHEAD, len(owner)))
                        if owner[d] == FREE]
                if free:
                    owner[free[0]] = THEIRS
                elif all(o != FREE for o in owner[start:]):
                    break           # every chunk is claimed: done
            if not free:
                time.sleep(0.001)   # the window is full: wait for the reader to move on
                continue
            entries, columns = [], []
            for i in range(free[0] * CHUNK, min(len(paths), (free[0] + 1) * CHUNK)):
                try:
                    slim, cols = record_file.rank_record(paths[i])
                    entries.append((i, "ok", (slim, len(cols["step"]))))
                    columns.append(cols)
                except CorruptFile as c:
                    entries.append((i, "bad", (c.path, c.reason, c.newer)))
            conn.send((entries, {k: np.concatenate([c[k] for c in columns]) for k in columns[0]}
                       if columns else {}))
        conn.send(None)
    except BaseException:   # noqa: BLE001  (the parent reads what was not sent)
        status = 1
    finally:
        conn.close()
        os._exit(status)
