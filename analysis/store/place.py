"""Where the results store is, and whether its place can be trusted (standard library only,
so that the report learns it without importing SQLAlchemy; the store: analysis/store/database.py).

`--store`, else DLBENCH_STORE, else the site file's `store.url` (conf/cluster/<site>.yaml,
recorded in each point.json), else $XDG_DATA_HOME/dlbench/results.sqlite
(~/.local/share/dlbench/results.sqlite). A path is a SQLite file, a URL
(postgresql+psycopg://user@host/db) a server; `off` turns the store off.

SQLite's locking is not to be trusted on a network filesystem (sqlite.org,
https://www.sqlite.org/howtocorrupt.html, section 2.1): a SQLite store on NFS, Lustre, GPFS,
BeeGFS, CIFS, ... is warned about, and a team shares a PostgreSQL store instead.
"""
import os

from analysis.read.record_file import RecordError
from analysis.read.results import Results

ENV = "DLBENCH_STORE"
OFF = ("off", "none", "false", "no", "0", "")
# filesystems (their /proc/mounts type) whose locks SQLite cannot trust
NETWORK_FS = ("nfs", "nfs4", "lustre", "cifs", "smb3", "smbfs", "gpfs", "beegfs", "ceph",
              "glusterfs", "sshfs", "afs", "9p", "panfs", "wekafs", "orangefs")


class StoreError(RecordError):
    """The store cannot be used: one line naming it and why (exit 2; a report goes on)."""


def default_path() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "dlbench", "results.sqlite")


def site_setting(results: Results) -> str | None:
    """The store.url the sweep's site file gave (cluster.store.url in its point.json), or None."""
    for point in results.manifests.values():
        url = (((point.get("cluster") or {}).get("store")) or {}).get("url")
        if url:
            return str(url)
    return None


def configured(explicit: object = None, site: str | None = None) -> str | None:
    """Where the store is (a path or a URL), or None when it is turned off."""
    for value in (explicit, os.environ.get(ENV), site):
        if value is not None:
            return None if str(value).strip().lower() in OFF else str(value)
    return default_path()


def is_url(where: object) -> bool:
    return "://" in str(where)


def mount_of(path: str, mounts_text: str | None = None) -> tuple[str, str] | None:
    """(mount point, filesystem type) of the filesystem that holds `path`, from /proc/mounts
    (or the given text of it): the longest mount point above it; None where unknown."""
    if mounts_text is None:
        try:
            with open("/proc/mounts") as f:
                mounts_text = f.read()
        except OSError:
            return None
    path = os.path.realpath(path)
    best: tuple[str, str] | None = None
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = path == mount or path.startswith(mount.rstrip("/") + "/")
        if inside and (best is None or len(mount) > len(best[0])):
            best = (mount, fields[2])
    return best


def network_warning(path: str, mounts_text: str | None = None) -> str | None:
    """The warning for a SQLite store on a network filesystem, or None."""
    found = mount_of(os.path.dirname(os.path.abspath(path)), mounts_text)
    if found and found[1].split(".")[-1] in NETWORK_FS:   # fuse.sshfs, fuse.glusterfs too
        return (f"warning: results store {path} lies on {found[1]} ({found[0]}): SQLite's locking "
                "is not to be trusted on a network filesystem (sqlite.org); a team shares a "
                "PostgreSQL store instead (store.url: docs/results-store.md)")
    return None
