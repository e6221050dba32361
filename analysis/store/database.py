"""The results store: an index of every sweep reported, that outlives the sweeps' folders
(docs/results-store.md). The folders (or their archives) stay the truth; `rebuild` makes the
index again from them.

Where it is: analysis/store/place.py (a path: a SQLite file; a URL: a server such as
PostgreSQL, through SQLAlchemy). Its tables: analysis/store/schema.py; what it keeps of a
sweep: analysis/store/rows.py.

Nothing lost, no one locked out: every add is one transaction (SQLite: BEGIN IMMEDIATE, and a
writer waits up to LOCK_WAIT_S for another); a store that is corrupt, locked, of a newer
suite, read-only or unreachable is one StoreError line naming it, and is never overwritten or
recreated. A SQLite store on a network filesystem (NFS, Lustre, ...) is warned about.
"""
import os
import sqlite3
import sys
import time
import urllib.parse
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import pandas as pd
import sqlalchemy as sa

from analysis.store import schema
from analysis.store.place import StoreError, is_url, network_warning
from contract import secrets

LOCK_WAIT_S = 30.0   # a writer waits this long for another before it gives up
T = TypeVar("T")
# What the store keeps of a sweep or a certification (analysis/store/rows.py's) and a stored
# row as read: JSON and SQL values of every kind, so Any.
Row = dict[str, Any]
Job = tuple[int, str, str | None]   # a stored Slurm job: (row id, job id, state)


def shown(where: str) -> str:
    """The store as messages name it: a path, or a URL without its password."""
    if is_url(where):
        try:
            return sa.engine.make_url(where).render_as_string(hide_password=True)
        except sa.exc.ArgumentError:
            return secrets.mask_url(str(where))
    return os.path.abspath(os.path.expanduser(where))


def server_url(where: str) -> sa.engine.URL:
    """A server's URL as SQLAlchemy connects to it. A password recorded masked (`***`: the
    site file's store.url in a point.json, contract/secrets.py) is left out, so that libpq
    finds it where PostgreSQL's clients do: PGPASSWORD, ~/.pgpass (PGPASSFILE), the service
    file of `?service=` (PGSERVICEFILE) (docs/results-store.md)."""
    url = sa.engine.make_url(where)
    if url.drivername in ("postgresql", "postgres"):   # psycopg (3) is the one installed
        url = url.set(drivername="postgresql+psycopg")
    if url.password != secrets.MASK:
        return url
    return sa.engine.URL.create(url.drivername, url.username, None, url.host, url.port,   # (set()
                                url.database, url.query)                                # keeps it)


def _first_line(exc: BaseException, password: str | None = None) -> str:
    """An error's first line, any password in it masked (a driver may echo its connection)."""
    orig = getattr(exc, "orig", None) or exc
    line = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    return secrets.mask_text(line, values=[password] if password else ())


class Store:
    """One store, opened to write (created where absent) or to read."""

    def __init__(self, where: str, write: bool = True) -> None:
        self.where, self.write, self.name = where, write, shown(where)
        self.version: int | None = None   # the store's schema version, once a transaction has read it
        self.password: str | None = None   # masked in every message
        if is_url(where):
            try:
                url = server_url(where)
                self.password = url.password
                self.engine = sa.create_engine(url, hide_parameters=True)
            except (sa.exc.ArgumentError, ImportError) as exc:
                raise StoreError(f"results store {self.name}: {_first_line(exc)}") from None
        else:
            self.engine = self._sqlite(self.name)

    def _sqlite(self, path: str) -> sa.Engine:
        if self.write:
            folder = os.path.dirname(path)
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"results store {path}: cannot make its folder: "
                                 f"{exc.strerror or exc}") from None
            if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
                raise StoreError(f"results store {path} is on a read-only path "
                                 "(SQLite writes the file and a journal beside it)")
            warning = network_warning(path)
            if warning:
                print(warning, file=sys.stderr)
            connect = lambda: sqlite3.connect(path, timeout=LOCK_WAIT_S, isolation_level=None,  # noqa: E731
                                              check_same_thread=False)
        else:
            if not os.path.isfile(path):
                raise StoreError(f"no results store at {path} (a report adds its sweep to it; "
                                 "or: python -m analysis store add SWEEP)")
            uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
            connect = lambda: sqlite3.connect(uri, uri=True, timeout=LOCK_WAIT_S,  # noqa: E731
                                              isolation_level=None, check_same_thread=False)
        engine = sa.create_engine("sqlite://", creator=connect, poolclass=sa.pool.NullPool)
        # pysqlite's own transaction handling is off (isolation_level=None): SQLAlchemy's
        # begin is this, so a writer takes the lock first and waits for another, not fails
        begin = "BEGIN IMMEDIATE" if self.write else "BEGIN"
        sa.event.listen(engine, "begin", lambda conn: conn.exec_driver_sql(begin))
        return engine

    def _failed(self, exc: BaseException) -> StoreError:
        text = _first_line(exc, self.password)
        if "locked" in text or "busy" in text:
            return StoreError(f"results store {self.name} is locked by another process "
                              f"(waited {LOCK_WAIT_S:.0f} s); left as it is")
        if "readonly" in text or "read-only" in text:
            return StoreError(f"results store {self.name} is on a read-only path: {text}")
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return StoreError(f"results store {self.name} is corrupt ({text}); left as it is: "
                              "move it aside, then `python -m analysis store rebuild SWEEP...`")
        if isinstance(exc, sa.exc.OperationalError) and is_url(self.where):
            return StoreError(f"results store {self.name} cannot be reached: {text}")
        return StoreError(f"results store {self.name}: {text}")

    def transaction(self, fn: Callable[[sa.Connection], T], retries: int = 1) -> T:
        """fn(connection) in one transaction, the store checked (and, to write, created or
        upgraded) first; a StoreError for any failure. Retried once where two writers raced
        to insert the same sweep."""
        try:
            with self.engine.begin() as conn:
                try:
                    if self.write:
                        schema.upgrade(conn)
                    self.version = schema.VERSION if self.write else schema.readable(conn)
                except (ValueError, schema.NewerStore) as exc:
                    raise StoreError(f"results store {self.name}: {exc}; left as it is") from None
                return fn(conn)
        except sa.exc.IntegrityError as exc:
            if retries > 0:
                return self.transaction(fn, retries - 1)
            raise self._failed(exc) from None
        except sa.exc.DBAPIError as exc:
            raise self._failed(exc) from None

    # --- writing -------------------------------------------------------------------
    def add(self, made: Sequence[Row], certified: Sequence[Row] = ()) -> list[str]:
        """Adds the sweeps of store_rows.sweeps and the certifications of
        store_rows.certifications, all in one transaction; a line per sweep and
        certification: added, replaced (its rows changed) or unchanged."""
        return self.transaction(lambda conn: [_add(conn, s) for s in made]
                                + [_add_certification(conn, c) for c in certified])

    def rebuild(self, made: Sequence[Row], certified: Sequence[Row] = ()) -> list[str]:
        """The store's content replaced by `made` and `certified`, in one transaction: a
        stored sweep or certification that none of them is, is dropped, and named."""
        def run(conn: sa.Connection) -> list[str]:
            gone: list[str] = []
            for table, new in ((schema.sweeps, made), (schema.certifications, certified)):
                keep = {s["key"] for s in new}
                gone += conn.execute(sa.select(table.c.key).where(table.c.key.not_in(keep))).scalars().all()
            _delete(conn, sa.true())
            conn.execute(schema.certifications.delete())
            lines = [_add(conn, s) for s in made] + [_add_certification(conn, c) for c in certified]
            return lines + [f"dropped {k}: under none of the paths given" for k in gone]
        return self.transaction(run)

    # --- reading -------------------------------------------------------------------
    def points(self, columns: Collection[str] | None = None) -> pd.DataFrame:
        """Every stored point (one row each; `columns`: only these of the points table), with
        its sweep's key, name, path, archive and date (sweep_key, sweep, sweep_path,
        sweep_archive, sweep_created); oldest sweep first. An older store's table is read
        with the columns it has."""
        def run(conn: sa.Connection) -> pd.DataFrame:
            pts = schema.points if self.version == schema.VERSION else \
                sa.Table("points", sa.MetaData(), autoload_with=conn)   # an older store's columns
            sw = schema.sweeps
            cols = [c for c in pts.c if c.name not in ("id", "sweep_id")
                    and (columns is None or c.name in columns)]
            result = conn.execute(
                sa.select(sw.c.key.label("sweep_key"), sw.c.name.label("sweep"),
                          sw.c.path.label("sweep_path"), sw.c.archive.label("sweep_archive"),
                          sw.c.created_unix.label("sweep_created"), *cols)
                .join_from(pts, sw, pts.c.sweep_id == sw.c.id)
                .order_by(sw.c.created_unix, sw.c.name, pts.c.point))
            return _frame(result)
        return self.transaction(run)

    def certifications(self) -> pd.DataFrame:
        """Every stored certification (one row each, its items as stored), oldest first; none
        from a store of before version 2."""
        def run(conn: sa.Connection) -> pd.DataFrame:
            if "certifications" not in sa.inspect(conn).get_table_names():
                return _empty([c.name for c in schema.certifications.c])
            t = schema.certifications
            return _frame(conn.execute(sa.select(t).order_by(t.c.created_unix, t.c.name)))
        return self.transaction(run)

    def sweeps(self) -> pd.DataFrame:
        def run(conn: sa.Connection) -> pd.DataFrame:
            return _frame(conn.execute(sa.select(schema.sweeps).order_by(schema.sweeps.c.created_unix)))
        return self.transaction(run)

    def jobs(self) -> list[Job]:
        """[(row id, job id, state)] of every stored Slurm job."""
        return self.transaction(lambda conn: [tuple(r) for r in conn.execute(
            sa.select(schema.jobs.c.id, schema.jobs.c.job_id, schema.jobs.c.state))])

    def set_states(self, states: Mapping[int, tuple[str | None, str]], when: float) -> int:
        """Row id -> (state, source): written; returns how many changed."""
        def run(conn: sa.Connection) -> int:
            for row_id, (state, source) in states.items():
                conn.execute(schema.jobs.update().where(schema.jobs.c.id == row_id)
                             .values(state=state, state_source=source, checked_unix=when))
            return len(states)
        return self.transaction(run)


def _frame(result: sa.CursorResult[Any]) -> pd.DataFrame:
    """A query's rows as a DataFrame, built column by column (from rows, 4x slower)."""
    keys, rows = list(result.keys()), result.all()
    if not rows:
        return _empty(keys)
    # typed here: pandas-stubs needs Python 3.11 (typing.Self), so under mypy's python_version
    # 3.10 (the suite's oldest) its constructors are Any
    frame: pd.DataFrame = pd.DataFrame({k: list(col) for k, col in zip(keys, zip(*rows))}, columns=keys)
    return frame


def _empty(columns: list[str]) -> pd.DataFrame:
    frame: pd.DataFrame = pd.DataFrame(columns=columns)   # typed here: as _frame's
    return frame


def _delete(conn: sa.Connection, which: sa.ColumnElement[bool]) -> None:
    """The sweeps `which` selects, with their points and jobs (explicitly: SQLite enforces
    no cascade unless asked)."""
    ids = sa.select(schema.sweeps.c.id).where(which).scalar_subquery()
    pids = sa.select(schema.points.c.id).where(schema.points.c.sweep_id.in_(ids)).scalar_subquery()
    conn.execute(schema.jobs.delete().where(schema.jobs.c.point_id.in_(pids)))
    conn.execute(schema.points.delete().where(schema.points.c.sweep_id.in_(ids)))
    conn.execute(schema.sweeps.delete().where(schema.sweeps.c.id.in_(ids)))


def _stored(conn: sa.Connection, table: sa.Table,
            made: Row) -> tuple[dict[str, str], sa.RowMapping | None, bool]:
    """(where `made` was read from, its stored row or None, whether that row is the same): a
    row of the same fingerprint only has its place brought up to date. `made` has its
    `archive` where it was read from one; else its label is its folder."""
    archive = made.get("archive")
    where = {"archive": os.path.abspath(archive)} if archive else {"path": os.path.abspath(made["label"])}
    old = conn.execute(sa.select(table).where(table.c.key == made["key"])).mappings().first()
    same = old is not None and old["fingerprint"] == made["fingerprint"]
    if old is not None and same:
        changed = {k: v for k, v in where.items() if old[k] != v}
        if changed:
            conn.execute(table.update().where(table.c.id == old["id"]).values(**changed))
    return where, old, same


def _add(conn: sa.Connection, made: Row) -> str:
    """One sweep (store_rows.sweeps' `made`)."""
    sw, now = schema.sweeps, time.time()
    where, old, same = _stored(conn, sw, made)
    if same:
        return f"unchanged {made['key']} ({made['points']} points)"
    values = {k: made[k] for k in ("key", "name", "created_unix", "suite_commit", "points",
                                   "fingerprint")}
    if old is not None:
        _delete(conn, sw.c.id == old["id"])
        values.update(added_unix=old["added_unix"], path=old["path"], archive=old["archive"])
    else:
        values["added_unix"] = now
    values.update(where, updated_unix=now)
    sweep_id = conn.execute(sw.insert().values(**values).returning(sw.c.id)).scalar_one()
    rows = [{**{k: v for k, v in r.items() if k != "jobs"}, "sweep_id": sweep_id}
            for r in made["rows"]]
    if rows:
        ids = conn.execute(schema.points.insert().returning(schema.points.c.id,
                                                            sort_by_parameter_order=True),
                           rows).scalars().all()
        jobs = [{"point_id": pid, "job_id": job, "current": current}
                for pid, r in zip(ids, made["rows"]) for job, current in r["jobs"]]
        if jobs:
            conn.execute(schema.jobs.insert(), jobs)
    return f"{'replaced' if old is not None else 'added'} {made['key']} ({made['points']} points)"


def _add_certification(conn: sa.Connection, made: Row) -> str:
    """One certification (store_rows.certifications' `made`)."""
    t, now = schema.certifications, time.time()
    where, old, same = _stored(conn, t, made)
    if same:
        return f"unchanged certification {made['key']} ({made['verdict']})"
    values = {k: v for k, v in made.items() if k not in ("label", "archive")}
    values.update(where, updated_unix=now)
    if old is not None:
        conn.execute(t.update().where(t.c.id == old["id"]).values(**values))
    else:
        conn.execute(t.insert().values(**values, added_unix=now))
    return (f"{'replaced' if old is not None else 'added'} certification {made['key']} "
            f"({made['verdict']}, {len(made['items'])} items)")


PURGED = "PURGED"   # a job accounting no longer knows (and never told us the end of)


def refresh(store: Store, timeout: float = 60, unsettled_only: bool = False) -> str:
    """Every stored Slurm job's state from accounting (one sacct call): where it answers, a
    job it no longer knows is PURGED (or keeps the end it was last seen with, `purged` as
    its source); where it does not answer, nothing changes. Returns a line saying what."""
    from launchers.backends.slurm import sacct
    rows = store.jobs()
    if unsettled_only:
        rows = [r for r in rows if r[2] not in sacct.FINAL]
    if not rows:
        return "no Slurm job to ask about"
    answer = sacct.accounting({job for _, job, _ in rows}, timeout)
    if answer is None:
        return (f"{len(rows)} Slurm job(s): accounting does not answer (sacct); their states "
                "are left as they were")
    states: dict[int, tuple[str | None, str]] = {}
    for row_id, job, state in rows:
        if answer.get(job):
            states[row_id] = (answer[job], "sacct")
        else:
            states[row_id] = (state if state in sacct.FINAL else PURGED, "purged")
    store.set_states(states, time.time())
    gone = sum(1 for s in states.values() if s[1] == "purged")
    return (f"{len(rows)} Slurm job(s) asked: {len(rows) - gone} known to accounting"
            + (f", {gone} no longer known to sacct (PURGED, or their last known end)" if gone else ""))
