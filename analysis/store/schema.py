"""The results store's tables (SQLAlchemy Core), its schema version, and how a store written
by an earlier suite is brought up to this one (docs/results-store.md).

    meta     key -> value: schema (dlbench.store), version
    sweeps   one row per sweep: its key (name@first point's creation), where it was read
             from (folder, archive), its date, suite commit, the fingerprint of its rows
    points   one row per point of a sweep: what it ran (framework and version, model,
             precision, layout, nodes x devices, batch, mode, method, device, image and digest,
             hosts) and its figures (analysis/figures/method.py, analysis/figures/metrics.py)
    jobs     a point's Slurm jobs (slurm.json) and their states (refreshed from sacct)
    certifications  one row per certification (certify/, its verdict.json): suite, date,
             verdict, baseline, threshold, the system, the health gate, every item's row,
             its sweeps' keys (since version 2)

The same tables on SQLite and PostgreSQL: only portable types (JSON is SQLAlchemy's, TEXT on
SQLite, JSON on PostgreSQL). A newer suite reads an older store: `upgrade` adds the tables
and (nullable) columns the store lacks, then runs the steps in UPGRADES for each version
passed; a store of a newer version than this suite is refused, never written.
"""
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.schema import CreateColumn

from analysis.figures.metrics import TRAINING
from contract import paths

SCHEMA = paths.STORE_SCHEMA
VERSION = 2
metadata = sa.MetaData()

meta = sa.Table("meta", metadata,
                sa.Column("key", sa.String(64), primary_key=True),
                sa.Column("value", sa.Text))

sweeps = sa.Table(
    "sweeps", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(300), nullable=False, unique=True),  # store_rows.sweep_key
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("path", sa.Text),          # the folder it was last read from (absolute)
    sa.Column("archive", sa.Text),       # the archive it was last read from, if any
    sa.Column("created_unix", sa.Float),  # its first point's creation: the sweep's date
    sa.Column("added_unix", sa.Float),   # first added to this store
    sa.Column("updated_unix", sa.Float),  # its rows last replaced
    sa.Column("suite_commit", sa.String(64)),
    sa.Column("points", sa.Integer),
    sa.Column("fingerprint", sa.String(64)),  # sha256 of its rows: the same sweep again changes nothing
)

_NUM = ("throughput", "tp_min", "tp_max", "tp_cv", "ci_lo", "ci_hi", "speedup", "efficiency",
        "step_p50", "step_p90", "step_p99", "straggler", "drift", "peak_device_bytes",
        "peak_memory_bytes", "latency_ms", "tokens_per_s", "tflops_per_device", "peak_tflops",
        "mfu")
points = sa.Table(
    "points", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("point", sa.String(255), nullable=False),
    *(sa.Column(name, sa.String(255)) for name in (
        "bench", "framework", "framework_version", "model", "model_size", "precision",
        "amp_dtype", "mode", "layout", "launcher", "device", "image", "image_digest", "image_runtime",
        "suite_commit", "status", "marks", "case_name")),
    sa.Column("compile", sa.Boolean),
    *(sa.Column(name, sa.Integer) for name in (
        "batch_size", "nodes", "gpus_per_node", "devices", "repeats", "n_ok", "n_recorded",
        "warmup_steps", "measure_steps")),
    sa.Column("created_unix", sa.Float, index=True),
    sa.Column("hosts", sa.Text),
    sa.Column("error", sa.Text),
    *(sa.Column(name, sa.Float) for name in _NUM),
    sa.Column("model_settings", sa.JSON),  # the resolved model (its size's keys folded in)
    sa.Column("parallel", sa.JSON),        # the layout (contract/parallel.py), or null
    sa.Column("figures", sa.JSON),         # figures.metrics' row: compare's baseline reads it
    sa.UniqueConstraint("sweep_id", "point"),
    sa.Index("points_config", "framework", "model", "precision"),
)

jobs = sa.Table(
    "jobs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("point_id", sa.Integer, sa.ForeignKey("points.id", ondelete="CASCADE"),
              nullable=False, index=True),
    sa.Column("job_id", sa.String(64), nullable=False),
    sa.Column("current", sa.Boolean),      # the point's last job (else one before a requeue)
    sa.Column("state", sa.String(32)),     # PENDING ... CANCELLED (sacct.py's), PURGED, or null
    sa.Column("state_source", sa.String(32)),  # sacct, or null: never asked
    sa.Column("checked_unix", sa.Float),
)


certifications = sa.Table(
    "certifications", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(300), nullable=False, unique=True),  # store_rows.certifications
    sa.Column("name", sa.String(255), nullable=False),   # its folder's name
    sa.Column("suite", sa.String(255)),
    sa.Column("path", sa.Text),
    sa.Column("archive", sa.Text),
    sa.Column("created_unix", sa.Float, index=True),
    sa.Column("added_unix", sa.Float),
    sa.Column("updated_unix", sa.Float),
    sa.Column("suite_commit", sa.String(64)),
    sa.Column("verdict", sa.String(32)),      # PASS, FAIL, RECORDED, NOT JUDGED
    sa.Column("exit_code", sa.Integer),
    sa.Column("baseline", sa.Text),           # its kind and name (never a store's URL)
    sa.Column("threshold", sa.Float),         # certify.threshold, where given for every item
    *(sa.Column(name, sa.Integer) for name in ("nodes", "gpus_per_node", "passed", "failed",
                                               "measured", "not_run")),
    sa.Column("launcher", sa.String(64)),
    sa.Column("cluster", sa.String(255)),
    sa.Column("health", sa.JSON),             # the gate's verdict in short: ok, hosts, sick
    sa.Column("items", sa.JSON),              # verdict.json's item rows
    sa.Column("sweeps", sa.JSON),             # its item sweeps' keys
    sa.Column("fingerprint", sa.String(64)),
)


def _bench_in_figures(conn: sa.Connection, md: sa.MetaData) -> None:
    """Version 1 -> 2: each stored point's figures name its bench, as analysis/figures/metrics.py's
    rows now do, and a collective's or a checkpoint's have no training figure (the
    regression gate's stored baselines, analysis/gate/reference.py, tell them apart so)."""
    rows = conn.execute(sa.select(points.c.id, points.c.bench, points.c.figures)
                        .where(points.c.figures.is_not(None))).all()
    for row_id, bench, fig in rows:
        if not isinstance(fig, dict) or "bench" in fig:
            continue
        fig = dict(fig, bench=bench or "train")
        if fig["bench"] != "train":
            fig.update(dict.fromkeys(TRAINING))
        conn.execute(points.update().where(points.c.id == row_id).values(figures=fig))


# version v -> fn(connection, metadata) run after the tables and columns of v + 1 were added,
# for changes that adding columns cannot express (a renamed column, a recomputed value).
UPGRADES: dict[int, Callable[[sa.Connection, sa.MetaData], None]] = {1: _bench_in_figures}


class NewerStore(Exception):
    """The store was written by a newer suite (its schema version is above VERSION)."""


def version_of(conn: sa.Connection) -> int | None:
    """The store's schema version; None for an empty database; ValueError when the database
    holds tables but is not a dlbench store."""
    names = set(sa.inspect(conn).get_table_names())
    if not names:
        return None
    if "meta" not in names:
        raise ValueError(f"not a dlbench results store (its tables: {', '.join(sorted(names)[:5])})")
    rows = dict(conn.execute(sa.select(meta.c.key, meta.c.value)).all())
    if rows.get("schema") != SCHEMA or not str(rows.get("version", "")).isdigit():
        raise ValueError(f"not a dlbench results store (schema {rows.get('schema')!r}, "
                         f"version {rows.get('version')!r})")
    return int(rows["version"])


def _not_newer(found: int | None) -> int | None:
    if found is not None and found > VERSION:
        raise NewerStore(f"its schema version {found} is newer than this suite's ({VERSION}): "
                         "upgrade the suite")
    return found


def readable(conn: sa.Connection) -> int:
    """The store's version, where this suite can read it (any version up to VERSION: the
    columns it has are read); ValueError or NewerStore else."""
    found = _not_newer(version_of(conn))
    if found is None:
        raise ValueError("it is empty (no sweep was ever added)")
    return found


def upgrade(conn: sa.Connection) -> int:
    """Brings the store on `conn` (in a transaction) to VERSION: created when empty; tables
    and columns added since its version, then UPGRADES' steps. Returns the version found."""
    found = _not_newer(version_of(conn))
    metadata.create_all(conn)   # the tables it lacks
    if found is None:
        conn.execute(meta.insert(), [{"key": "schema", "value": SCHEMA},
                                     {"key": "version", "value": str(VERSION)}])
        return VERSION
    if found < VERSION:
        inspector = sa.inspect(conn)
        for table in metadata.sorted_tables:
            have = {c["name"] for c in inspector.get_columns(table.name)}
            for column in table.columns:
                if column.name not in have:   # ALTER TABLE ... ADD COLUMN, as this dialect spells it
                    spec = CreateColumn(column).compile(dialect=conn.dialect)
                    table_name = conn.dialect.identifier_preparer.format_table(table)
                    conn.exec_driver_sql(f"ALTER TABLE {table_name} ADD COLUMN {spec}")
        for v in range(found, VERSION):
            if v in UPGRADES:
                UPGRADES[v](conn, metadata)
        conn.execute(meta.update().where(meta.c.key == "version").values(value=str(VERSION)))
    return found
