"""The results store's version 2 (analysis/store/schema.py): certifications kept beside the
sweeps, and a store of version 1 brought up to it: the table added, each stored point's
figures given their bench (a collective's losing the training figures it never had), the
sweeps kept; then a certification added to it, and rebuilt from the folders."""
import os
import sqlite3

import sqlalchemy as sa

from analysis.store import database as store
from analysis.store import schema
from contract import paths, records
from tests.store_scenario import run
from tests.unit.test_certify_baselines import a_sweep


def certification(root, name, created, verdict="PASS") -> str:
    folder = os.path.join(str(root), name)
    a_sweep(folder, "items")
    records.write_json_atomic(os.path.join(folder, paths.VERDICT_FILE), {
        "schema": paths.CERTIFICATION_SCHEMA, "version": 1, "name": name, "suite": "t",
        "created_unix": created, "verdict": verdict, "exit_code": 0 if verdict == "PASS" else 1,
        "system": {"nodes": 1, "gpus_per_node": 2, "launcher": "slurm", "cluster": "c"},
        "baseline": {"kind": "folder", "name": "/x"}, "threshold": None,
        "counts": {"PASS": 2, "FAIL": 0, "MEASURED": 1, "NOT RUN": 0},
        "health": {"ok": True, "hosts": ["node1"]}, "items": [{"item": "c", "point": "p", "measured": 3.0}]})
    return folder


def as_version_1(where: str) -> None:
    """What the suite before version 2 would have left in the store at `where` (SQLite or
    PostgreSQL): no certifications table, figures without their bench, version 1."""
    engine = store.Store(where).engine
    with engine.begin() as conn:
        schema.certifications.drop(conn)
        for row_id, fig in conn.execute(sa.select(schema.points.c.id, schema.points.c.figures)).all():
            fig = dict(fig)
            fig.pop("bench")
            fig["throughput"] = fig["throughput"] or 0.0   # a collective's, as version 1 stored it
            conn.execute(schema.points.update().where(schema.points.c.id == row_id).values(figures=fig))
        conn.execute(schema.meta.update().where(schema.meta.c.key == "version").values(value="1"))
    engine.dispose()


def stored_figures(where: str, sweep: str) -> dict:
    """point -> its stored figures, of one stored sweep."""
    st = store.Store(where, write=False)
    frame = st.points(columns=("point", "figures"))
    return {p: f for p, f, s in zip(frame.point, frame.figures, frame.sweep) if s == sweep}


def test_a_version_1_store_is_brought_up_to_version_2(tmp_path, capsys):
    db = str(tmp_path / "store.sqlite")
    sweep = a_sweep(tmp_path, "old")
    code, out, err = run(capsys, "store", "add", sweep, "--store", db)
    assert code == 0 and "added old@" in out, err
    as_version_1(db)
    assert schema.VERSION == 2
    with sqlite3.connect(db) as conn:
        assert "certifications" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    # read as it is (version 1): its sweeps, no certification
    assert store.Store(db, write=False).certifications().empty
    code, out, err = run(capsys, "history", "--store", db)
    assert code == 0 and "## pytorch resnet50 (tiny) fp32 1x2 bs8" in out and "Certifications" not in out
    # written to: upgraded, then the certification added
    cert = certification(tmp_path, "certify-1", 1_790_000_000.0)
    code, out, err = run(capsys, "store", "add", cert, "--store", db)
    assert code == 0 and "added certification certify-1@1790000000.000 (PASS, 1 items)" in out, err
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='version'").fetchone() == ("2",)
    figures = stored_figures(db, "old")
    assert {p[:3]: f["bench"] for p, f in figures.items()} == {"000": "train", "001": "comm", "002": "checkpoint"}
    assert figures["001-comm-pytorch-float32-1x2"]["throughput"] is None      # no training figure
    assert figures["000-pytorch-resnet50-fp32-1x2-bs8"]["throughput"] > 0
    st = store.Store(db, write=False)
    assert st.sweeps().name.tolist() == ["old", "items"]
    (c,) = st.certifications().to_dict("records")
    assert (c["suite"], c["verdict"], c["passed"], c["measured"], c["baseline"]) == ("t", "PASS", 2, 1, "folder /x")
    assert c["path"] == cert and c["sweeps"] == [k for k in st.sweeps().key if k.startswith("items@")]
    code, out, _ = run(capsys, "history", "--store", db)
    assert out.startswith("# Certifications") and "| t       | PASS      | 2/0/1/0 | folder /x  |" in out


def test_certifications_are_added_once_and_rebuilt_from_their_folders(tmp_path, capsys):
    db = str(tmp_path / "store.sqlite")
    one, two = certification(tmp_path, "c1", 1_790_000_000.0), certification(tmp_path, "c2", 1_790_086_400.0, "FAIL")
    for _ in range(2):   # the same again changes nothing
        code, out, _ = run(capsys, "store", "add", one, "--store", db)
    assert "unchanged certification c1@1790000000.000 (PASS)" in out
    run(capsys, "store", "add", two, "--store", db)
    code, out, _ = run(capsys, "store", "rebuild", one, "--store", db)
    assert code == 0 and "dropped c2@1790086400.000: under none of the paths given" in out
    assert store.Store(db, write=False).certifications().name.tolist() == ["c1"]
    code, out, _ = run(capsys, "history", "--store", db, "--since", "2026-09-22")
    assert "Certifications" not in out   # c1 is of 2026-09-21
