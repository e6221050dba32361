"""The results store on SQLite (analysis/store/database.py): sweeps found again after their
folders are gone, the same sweep added twice, two writers at once, and a store that cannot be
used: corrupt, locked, read-only, newer, on a network filesystem. The same scenario on a real
PostgreSQL: tests/integration/test_results_store_postgres.py."""
import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from analysis.read import archive
from analysis.store import database as store
from analysis.store import place as store_place
from analysis.store import schema as store_schema
from tests.store_scenario import DAY, T0, run, sweep, two_sweeps_one_deleted

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "store" / "results.sqlite")


def counts(path) -> tuple:
    with sqlite3.connect(path) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("sweeps", "points", "jobs"))


def test_two_sweeps_reported_one_deleted_still_listed_and_compared(tmp_path, db, capsys):
    two_sweeps_one_deleted(tmp_path / "sweeps", db, capsys)
    assert counts(db) == (2, 2, 0)


def test_the_same_sweep_twice_and_from_its_archive_changes_nothing(tmp_path, db, capsys):
    s = sweep(tmp_path, "A", T0, [1.0, 1.25])
    code, out, err = run(capsys, "store", "add", s, "--store", db)
    assert code == 0 and "added A@1790000000.000 (1 points)" in out, err
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT * FROM points").fetchall()
    code, out, _ = run(capsys, "store", "add", s, "--store", db)
    assert "unchanged A@1790000000.000" in out
    code, out, _ = run(capsys, "archive", s)
    assert code == 0 and out.startswith(f"archive: {s}.tar.zst: ")
    code, out, _ = run(capsys, "store", "add", s + ".tar.zst", "--store", db)
    assert "unchanged A@1790000000.000" in out
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM points").fetchall() == before
        assert conn.execute("SELECT path, archive FROM sweeps").fetchall() == [(s, s + ".tar.zst")]
    assert counts(db) == (1, 1, 0)
    # a repeat recorded since: the sweep's rows are replaced, not doubled
    sweep(tmp_path, "A", T0, [1.0, 1.25, 0.5])
    code, out, _ = run(capsys, "store", "add", s, "--store", db)
    assert "replaced A@1790000000.000" in out and counts(db) == (1, 1, 0)
    frame = store.Store(db, write=False).points()
    assert frame.n_ok.tolist() == [3] and frame.tp_max.tolist() == [160.0]


def edit(path, change) -> None:
    with open(path) as f:
        data = json.load(f)
    change(data)
    with open(path, "w") as f:
        json.dump(data, f)


def test_what_a_point_keeps(tmp_path, db, capsys):
    s = sweep(tmp_path, "A", T0, [1.0], gpus_per_node=2, point="000-pytorch-resnet50-fp32-1x2-bs8")
    records_of = os.path.join(s, "points", "000-pytorch-resnet50-fp32-1x2-bs8")
    with open(os.path.join(records_of, "slurm.json"), "w") as f:
        json.dump({"job_id": "77_3", "previous_jobs": ["70_3"]}, f)
    # the image the point was configured with, and the digest its ranks recorded running in it
    edit(os.path.join(records_of, "point.json"),
         lambda p: p["framework"].update(container="nvcr.io#nvidia/pytorch:24.05-py3"))
    edit(os.path.join(records_of, "repeat-00", "rank-00001.json"),
         lambda r: r.update(container={"runtime": "charliecloud", "image": "pytorch.sqsh",
                                       "digest": "sha256:ab12"}))
    run(capsys, "store", "add", s, "--store", db)
    row = store.Store(db, write=False).points().iloc[0]
    assert (row.framework, row.framework_version, row.model, row.precision, row.nodes,
            row.gpus_per_node, row.devices, row.batch_size) == ("pytorch", "9.9", "resnet50", "fp32",
                                                                1, 2, 2, 8)
    assert row.throughput == 160.0 and row.hosts == "node1" and row.device == "cpu"
    assert row.suite_commit == "c0ffee" and row.created_unix == T0 and row.sweep_path == s
    assert row.figures["latency_ms"] == pytest.approx(100.0)   # 1 s over 10 steps
    assert (row.image, row.image_digest, row.image_runtime) == ("pytorch.sqsh", "sha256:ab12",
                                                                "charliecloud")
    with sqlite3.connect(db) as conn:
        assert sorted(conn.execute("SELECT job_id, \"current\", state FROM jobs")) == [
            ("70_3", 0, None), ("77_3", 1, None)]


def test_rebuild_makes_the_store_anew_and_names_what_it_dropped(tmp_path, db, capsys):
    a, b = sweep(tmp_path, "A", T0, [1.0]), sweep(tmp_path, "B", T0 + DAY, [1.0])
    run(capsys, "store", "add", a, b, "--store", db)
    code, out, _ = run(capsys, "store", "rebuild", b, "--store", db)
    assert code == 0 and "added B@" in out and "dropped A@1790000000.000" in out
    assert counts(db) == (1, 1, 0)
    code, out, _ = run(capsys, "store", "list", "--store", db)
    assert "| B@" in out and "A@" not in out


def test_two_concurrent_adds_both_land(tmp_path, db, capsys):
    """Two processes add at the same moment while a third holds the write lock: both wait
    for it (SQLite's busy wait) and both land."""
    a, b = sweep(tmp_path, "A", T0, [1.0]), sweep(tmp_path, "B", T0 + DAY, [1.0])
    run(capsys, "store", "add", sweep(tmp_path, "Z", T0 - DAY, [1.0]), "--store", db)  # made
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    procs = [subprocess.Popen([sys.executable, "-m", "analysis", "store", "add", s, "--store", db],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in (a, b)]
    time.sleep(2.0)            # both started and wait on the lock
    assert all(p.poll() is None for p in procs)
    holder.execute("COMMIT")
    holder.close()
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "added A@" in outs[0][0] and "added B@" in outs[1][0]
    assert counts(db) == (3, 3, 0)


def test_a_corrupt_store_is_one_line_and_left_as_it_is(tmp_path, db, capsys):
    os.makedirs(os.path.dirname(db))
    garbage = b"this is not a database" * 100
    with open(db, "wb") as f:
        f.write(garbage)
    s = sweep(tmp_path, "A", T0, [1.0])
    code, out, err = run(capsys, "store", "add", s, "--store", db)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: results store {db} is corrupt (file is not a database); left as it is")
    code, _, err = run(capsys, "history", "--store", db)
    assert code == 2 and "is corrupt" in err
    with open(db, "rb") as f:
        assert f.read() == garbage
    # a database of something else is not taken for a store, nor written
    other = str(tmp_path / "other.sqlite")
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE mine (x)")
    code, _, err = run(capsys, "store", "add", s, "--store", other)
    assert code == 2 and "not a dlbench results store (its tables: mine)" in err
    with sqlite3.connect(other) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["mine"]


def test_a_locked_store_is_one_line_after_waiting(tmp_path, db, capsys, monkeypatch):
    s = sweep(tmp_path, "A", T0, [1.0])
    run(capsys, "store", "add", s, "--store", db)
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.5)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code, _, err = run(capsys, "store", "add", s, "--store", db)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 2 and err == f"error: results store {db} is locked by another process " \
                                "(waited 0 s); left as it is\n"
    assert counts(db) == (1, 1, 0)


def _read_only(folder, argv) -> subprocess.CompletedProcess:
    """argv run with `folder` read-only: a read-only bind mount in a mount namespace of its
    own (root, which file modes do not stop), else the folder's mode."""
    cmd = [sys.executable, "-m", "analysis", *argv]
    if os.geteuid() == 0:
        script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
        cmd = ["unshare", "-m", "sh", "-c", script, "sh", str(folder), *cmd]
    else:
        os.chmod(folder, 0o555)
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        os.chmod(folder, 0o755)


def test_a_read_only_store_path_is_one_line_and_can_be_read(tmp_path, db, capsys):
    s = sweep(tmp_path, "A", T0, [1.0])
    run(capsys, "store", "add", s, "--store", db)
    folder = os.path.dirname(db)
    got = _read_only(folder, ["store", "add", s, "--store", db])
    assert got.returncode == 2, got.stderr
    assert got.stderr == f"error: results store {db} is on a read-only path (SQLite writes " \
                         "the file and a journal beside it)\n"
    got = _read_only(folder, ["history", "--store", db])   # reading it is fine
    assert got.returncode == 0 and "| A " in got.stdout, got.stderr
    # the report of a sweep still prints and writes its files, and says the store was not written
    got = _read_only(folder, ["report", s, "--no-plot", "--store", db])
    assert got.returncode == 0, got.stderr
    assert "## resnet50 (tiny)" in got.stdout and os.path.isfile(os.path.join(s, "report", "points.csv"))
    assert got.stderr == f"warning: the results store was not written: results store {db} is " \
                         "on a read-only path (SQLite writes the file and a journal beside it)\n"


def test_the_report_goes_on_when_the_store_is_corrupt(tmp_path, db, capsys):
    os.makedirs(os.path.dirname(db))
    with open(db, "wb") as f:
        f.write(b"\x00garbage" * 512)
    s = sweep(tmp_path, "A", T0, [1.0])
    code, out, err = run(capsys, "report", s, "--no-plot", "--store", db)
    assert code == 0 and "## resnet50 (tiny)" in out and "page: " in out
    assert err.startswith(f"warning: the results store was not written: results store {db} is corrupt")
    assert os.path.isfile(os.path.join(s, "report", "report.html"))


def test_a_newer_store_is_refused_and_an_older_one_upgraded(tmp_path, db, capsys, monkeypatch):
    s = sweep(tmp_path, "A", T0, [1.0])
    run(capsys, "store", "add", s, "--store", db)
    # a later suite whose points table has one column more, at the next version, reads this store
    extra = sa.Column("energy_j", sa.Float)
    store_schema.points.append_column(extra)
    now = store_schema.VERSION
    monkeypatch.setattr(store_schema, "VERSION", now + 1)
    try:
        code, out, err = run(capsys, "store", "add", sweep(tmp_path, "B", T0 + DAY, [0.5]), "--store", db)
        assert code == 0 and "added B@" in out, err
        frame = store.Store(db, write=False).points()
        assert frame.sweep.tolist() == ["A", "B"] and frame.energy_j.isna().all()
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT value FROM meta WHERE key='version'").fetchone() == (str(now + 1),)
    finally:
        store_schema.points._columns.remove(extra)
        monkeypatch.setattr(store_schema, "VERSION", now)
    # and this suite, which knows its own version, refuses that store and leaves it as it is
    size = os.path.getsize(db)
    for argv in (["store", "add", s], ["history"]):
        code, _, err = run(capsys, *argv, "--store", db)
        assert code == 2 and err.count("\n") == 1 and f"newer than this suite's ({now})" in err
    assert os.path.getsize(db) == size


MOUNTS = """proc /proc proc rw,nosuid 0 0
/dev/sda1 / ext4 rw,relatime 0 0
fs1:/export/home /home nfs4 rw,vers=4.2 0 0
10.0.0.1@o2ib:/lustre /lustre lustre rw,flock 0 0
/dev/sdb1 /lustre/local\\040disk xfs rw 0 0
sshfs#me@host: /mnt/remote fuse.sshfs rw 0 0
"""


def test_a_sqlite_store_on_a_network_filesystem_is_warned_about():
    assert store_place.mount_of("/home/me/.local/share/dlbench", MOUNTS) == ("/home", "nfs4")
    assert store_place.mount_of("/lustre/local disk/x", MOUNTS) == ("/lustre/local disk", "xfs")
    for path, fs in (("/home/me/results.sqlite", "nfs4"), ("/lustre/proj/results.sqlite", "lustre"),
                     ("/mnt/remote/r.sqlite", "fuse.sshfs")):
        text = store_place.network_warning(path, MOUNTS)
        assert text.startswith(f"warning: results store {path} lies on {fs}") and "PostgreSQL" in text
    for path in ("/var/tmp/results.sqlite", "/lustre/local disk/r.sqlite", "/homework/r.sqlite"):
        assert store_place.network_warning(path, MOUNTS) is None


def test_where_the_store_is(tmp_path, monkeypatch):
    monkeypatch.delenv(store_place.ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert store_place.configured() == str(tmp_path / "data" / "dlbench" / "results.sqlite")
    assert store_place.configured(site="postgresql+psycopg://db/x") == "postgresql+psycopg://db/x"
    monkeypatch.setenv(store_place.ENV, "/x/r.sqlite")
    assert store_place.configured(site="postgresql+psycopg://db/x") == "/x/r.sqlite"
    assert store_place.configured("/y.sqlite") == "/y.sqlite"
    monkeypatch.setenv(store_place.ENV, "off")
    assert store_place.configured(site="postgresql+psycopg://db/x") is None


def test_the_site_files_store_url_is_where_the_report_adds(tmp_path, db, capsys, monkeypatch):
    s = sweep(tmp_path, "A", T0, [1.0])
    path = os.path.join(s, "points", "000-pytorch-resnet50-fp32-1x1-bs8", "point.json")
    with open(path) as f:
        point = json.load(f)
    with open(path, "w") as f:
        json.dump(dict(point, cluster={"name": "mysite", "store": {"url": db}}), f)
    monkeypatch.delenv(store_place.ENV)
    code, out, err = run(capsys, "report", s, "--no-plot")
    assert code == 0 and f"store {db}: added A@" in out, err
    assert counts(db) == (1, 1, 0)


def test_an_archive_added_then_its_folder_gone(tmp_path, db, capsys):
    s = sweep(tmp_path, "A", T0, [1.0])
    out_file = str(tmp_path / "shared" / "A.tar.zst")
    os.makedirs(os.path.dirname(out_file))
    assert run(capsys, "archive", s, "--out", out_file)[0] == 0
    code, out, _ = run(capsys, "report", out_file, "--no-plot", "--store", db)
    assert code == 0 and "added A@1790000000.000 (1 points)" in out
    assert os.path.isfile(archive.report_dir(out_file) + "/points.csv")
    frame = store.Store(db, write=False).points()
    assert frame.sweep.tolist() == ["A"] and frame.sweep_archive.tolist() == [out_file]


def test_no_store_yet_or_turned_off_is_one_line(tmp_path, capsys):
    missing = str(tmp_path / "none" / "results.sqlite")
    code, _, err = run(capsys, "history", "--store", missing)
    assert code == 2 and err == f"error: no results store at {missing} (a report adds its sweep " \
                                "to it; or: python -m analysis store add SWEEP)\n"
    assert not os.path.exists(missing)   # reading makes nothing
    code, _, err = run(capsys, "store", "list", "--store", "off")
    assert code == 2 and err == "error: the results store is turned off (--store off or " \
                                "DLBENCH_STORE=off)\n"
