"""Plain file operations a checkpoint is measured against and made durable with: the bare
write and read of a rank's bytes (no checkpoint library), each file closed and fsynced, a
folder's entries fsynced, written files evicted from the page cache so that reading them
back reads the storage where the filesystem allows it (docs/checkpoint.md).
Standard library only: any framework's worker may use it.
"""
import os
import shutil

CHUNK = 64 << 20   # bytes per write and read call


def write_file(path: str, chunk, nbytes: int) -> int:
    """Write `nbytes` to a new file at `path` by repeating `chunk` (a buffer: bytes, a
    memoryview, a numpy array), then fsync and close it. Returns the bytes written; OSError
    as the system raises it (ENOSPC, EROFS, ...)."""
    view = memoryview(chunk).cast("B")
    if not len(view) and nbytes:
        raise ValueError("an empty chunk cannot fill a file")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        left = nbytes
        while left:
            part = view[:min(left, len(view))]
            while len(part):
                n = os.write(fd, part)
                part, left = part[n:], left - n
        os.fsync(fd)
    finally:
        os.close(fd)
    return nbytes


def buffer(nbytes: int) -> bytearray:
    """A reusable read buffer for a file of `nbytes` (at most CHUNK): made before the clock."""
    return bytearray(max(1, min(nbytes, CHUNK)))


def read_file(path: str, buf: bytearray) -> int:
    """Read the whole file at `path` through `buf`, again and again; returns the bytes read."""
    view, total = memoryview(buf), 0
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(view)
            if not n:
                return total
            total += n


def fsync_dir(path: str) -> None:
    """Make a folder's entries (new files, a rename) durable: fsync the folder itself."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_cache(path: str) -> bool:
    """Ask the kernel to evict a written, synced file from the page cache (posix_fadvise
    DONTNEED), so that it is read back from storage; False where there is no such call.
    A filesystem that keeps its data in memory (tmpfs) keeps it there whatever is asked."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def folder_bytes(path: str, prefix: str = "") -> int:
    """The bytes of the files directly in `path` whose names start with `prefix`."""
    with os.scandir(path) as entries:
        return sum(e.stat().st_size for e in entries if e.is_file() and e.name.startswith(prefix))


def remove(path: str) -> None:
    """Remove a file or a folder tree; what is already gone is no error."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
