"""A sweep's rank records read by two processes: analysis/read/load.py asks for them in its own
order, and a second process, forked for it, reads ahead of it.

The records are dealt in chunks of CHUNK, in order, to whichever process claims the next
one first; once the reader has asked for its first record, never more than AHEAD chunks past
the one it asks for (so that what was read ahead and not yet used stays small). `Ahead(paths)`
forks the second process and returns at once; `take(path)` is record_file.rank_record(path):
the record without its steps and its step columns, or the CorruptFile that says why not. A
path of a chunk this process claimed is read here when asked for; one of a chunk the second
process claimed comes from it (each chunk's records, and their steps as one set of columns,
pickled, collected by a thread as they come), and while it has not come this process reads
the next unclaimed chunk itself, so that neither waits on the other while there is work. What
a record says is the same whichever process read it. Where no process can be forked, or for
few bytes, the caller reads every record itself (`worth`).

`python -m analysis report PATH` starts reading PATH's records as the package is imported
(`start_early`, from analysis/__init__.py), before pandas and the rest are: that import is
half a second in which the second core would otherwise be idle; load() takes that reader
over when it reads the same records (`reader`).

Forked, not spawned: the child has the parent's imports (a fresh interpreter would import
them again), and it only reads files, pickles and exits.
"""
import multiprocessing
import os
import pickle
import threading
import time

import numpy as np

from analysis.read import record_file
from analysis.read.record_file import CorruptFile
from contract import paths as sweep_paths

MIN_BYTES = 16 << 20   # less than this is read faster than a second process starts and pays back
CHUNK = 8              # records a process claims at a time
AHEAD = 8              # chunks either may claim past the one asked for
FREE, MINE, THEIRS = 0, 1, 2   # a chunk's owner, in the shared table
# `python -m analysis report`'s options that take a value (analysis/__main__.py)
_VALUED = ("--out", "--html", "--max-cv", "--max-drift", "--store")
_early = None


def worth(total_bytes: int) -> bool:
    return total_bytes >= MIN_BYTES and "fork" in multiprocessing.get_all_start_methods()


def rank_records(point_files) -> tuple:
    """(every rank record path under the points, in the order analysis/read/load.py reads them;
    their bytes in all)."""
    out, size = [], 0
    for pfile in point_files:
        pdir = os.path.dirname(pfile)
        try:
            names = sorted(os.listdir(pdir))
        except OSError:
            continue
        for name in names:
            if not sweep_paths.REPEAT_RE.match(name):
                continue
            rdir = os.path.join(pdir, name)
            try:
                entries = sorted((e.name, e) for e in os.scandir(rdir)
                                 if sweep_paths.RANK_RECORD_RE.match(e.name))
            except OSError:    # not a folder, or gone: the reader says so
                continue
            for fname, entry in entries:
                try:
                    size += entry.stat().st_size
                except OSError:
                    continue
                out.append(os.path.join(rdir, fname))
    return out, size


def start_early(argv) -> None:
    """When `argv` (sys.orig_argv) is `python -m analysis report ... PATH ...`, a reader of
    PATH's rank records, started now; anything else, or an odd command line: nothing."""
    global _early
    try:
        at = list(argv).index("-m")
    except ValueError:
        return
    if list(argv[at + 1:at + 3]) != ["analysis", "report"] or _early is not None:
        return
    rest, path = list(argv[at + 3:]), None
    while rest:
        arg = rest.pop(0)
        if arg in ("-h", "--help"):
            return
        if arg in _VALUED:
            rest = rest[1:]
        elif not arg.startswith("-"):
            path = arg
            break
    if path is None or not os.path.isdir(path):
        return
    records, size = rank_records(sweep_paths.point_files(path))
    if records and worth(size):
        _early = Ahead(records)


def reader(records: list, size: int):
    """A reader of `records` for analysis/read/load.py: the one started early, where it reads the
    same records, else a new one where it is worth it, else None."""
    global _early
    early, _early = _early, None
    if early is not None:
        if early.paths == records:
            return early
        early.close()
    return Ahead(records) if worth(size) else None


class Ahead:
    def __init__(self, paths):
        ctx = multiprocessing.get_context("fork")
        self.paths = list(paths)
        self.index = {p: i for i, p in enumerate(self.paths)}
        chunks = -(-len(self.paths) // CHUNK)
        self._owner = ctx.RawArray("b", chunks)   # FREE, MINE or THEIRS per chunk
        self._asked = ctx.RawValue("q", -1)      # the chunk asked for last (-1: none yet)
        self._lock = ctx.Lock()
        self._got = {}           # index -> (slim, columns) or a CorruptFile, read ahead
        self._inbox = []         # what the second process sent, as it came (pickled)
        self._came = threading.Condition()
        self._finished = False   # the second process has sent all it will
        conn, child = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(self.paths, self._owner, self._asked,
                                                      self._lock, child), daemon=True)
        self._proc.start()
        child.close()
        threading.Thread(target=self._collect, args=(conn,), daemon=True,
                         name="dlbench-read-ahead").start()

    def _collect(self, conn) -> None:
        """The thread: every message, kept as it comes, so that the second process never
        waits on a full pipe while this one is busy (importing, computing)."""
        while True:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):   # it died: what it claimed and did not send is read here
                message = None
            with self._came:
                self._inbox.append(message)
                self._came.notify()
            if message is None:
                conn.close()
                return

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
                return record_file.rank_record(path)
            # the second process's chunk: what it has sent, else the next free chunk here
            self._unpack(block=False)
            if i in self._got or self._finished:
                break
            ahead = self._claim(c)
            if ahead is not None:
                self._read(ahead)
            else:
                self._unpack(block=True)    # nothing else to do: wait for it
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

    def _unpack(self, block: bool) -> None:
        """The messages come so far (with `block`, at least one)."""
        with self._came:
            if block:
                self._came.wait_for(lambda: self._inbox)
            inbox, self._inbox = self._inbox, []
        for message in inbox:
            if message is None:
                self._finished = True
                continue
            entries, columns = pickle.loads(message)
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


def _child(paths, owner, asked, lock, conn) -> None:
    """The second process: claims the first free chunk it may and sends what it read."""
    status = 0
    try:
        while True:
            with lock:
                start = asked.value
                stop = len(owner) if start < 0 else min(start + 1 + AHEAD, len(owner))
                free = next((d for d in range(max(start, 0), stop) if owner[d] == FREE), None)
                if free is not None:
                    owner[free] = THEIRS
                elif all(o != FREE for o in owner[max(start, 0):]):
                    break           # every chunk is claimed: done
            if free is None:
                time.sleep(0.001)   # the window is full: wait for the reader to move on
                continue
            entries: list[tuple[int, str, tuple]] = []
            columns = []
            for i in range(free * CHUNK, min(len(paths), (free + 1) * CHUNK)):
                try:
                    slim, cols = record_file.rank_record(paths[i])
                    entries.append((i, "ok", (slim, len(cols["step"]))))
                    columns.append(cols)
                except CorruptFile as c:
                    entries.append((i, "bad", (c.path, c.reason, c.newer)))
            conn.send_bytes(pickle.dumps(
                (entries, {k: np.concatenate([c[k] for c in columns]) for k in columns[0]}
                 if columns else {}), pickle.HIGHEST_PROTOCOL))
    except BaseException:   # noqa: BLE001  (the parent reads what was not sent)
        status = 1
    finally:
        conn.close()
        os._exit(status)
