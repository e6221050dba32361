"""The results store on a real PostgreSQL that the test starts itself (tests/postgres_server.py:
Debian's postgresql, a temporary data folder and port): the scenario of the SQLite tests
(two sweeps reported, one folder deleted, history and compare from what is stored), the
same sweep twice, two concurrent adds, a store of version 1 brought up to version 2 (its
certifications table, its stored figures' bench), a server that does not answer, and a role
whose password is in no file of the sweep or the checkout."""
import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from analysis.store import schema as store_schema
from contract import records
from launchers.suite import ROOT
from tests import postgres_server, secret_search
from tests.secret_search import PASSWORD
from tests.store_scenario import DAY, POINT, T0, run, sweep, two_sweeps_one_deleted


@pytest.fixture(scope="module")
def postgres():
    reason = postgres_server.skip_reason()
    if reason:
        pytest.skip(reason)
    with postgres_server.server() as url:
        yield url


@pytest.fixture
def url(postgres):
    """The module's server, its store emptied for each test."""
    engine = sa.create_engine(postgres)
    store_schema.metadata.drop_all(engine)   # every table of the store, whatever its version
    engine.dispose()
    return postgres


def counts(url) -> tuple:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        got = tuple(conn.exec_driver_sql(f"SELECT count(*) FROM {t}").scalar()
                    for t in ("sweeps", "points", "jobs"))
    engine.dispose()
    return got


def test_two_sweeps_reported_one_deleted_on_postgresql(tmp_path, url, capsys):
    two_sweeps_one_deleted(tmp_path / "sweeps", url, capsys)
    assert counts(url) == (2, 2, 0)
    code, out, _ = run(capsys, "store", "list", "--store", url)
    assert code == 0 and "(gone)" in out.splitlines()[3] and "| B@" in out


def test_the_same_sweep_twice_changes_nothing_and_concurrent_adds_land(tmp_path, url, capsys):
    a = sweep(tmp_path, "A", T0, [1.0])
    assert "added A@" in run(capsys, "store", "add", a, "--store", url)[1]
    assert "unchanged A@" in run(capsys, "store", "add", a, "--store", url)[1]
    others = [sweep(tmp_path, f"S{k}", T0 + k * DAY, [1.0]) for k in (1, 2)]
    procs = [subprocess.Popen([sys.executable, "-m", "analysis", "store", "add", s, "--store", url],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in others]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert counts(url) == (3, 3, 0)


def test_a_server_that_does_not_answer_is_one_line(tmp_path, capsys):
    dead = "postgresql+psycopg://postgres@127.0.0.1:1/none"
    code, _, err = run(capsys, "store", "add", sweep(tmp_path, "A", T0, [1.0]), "--store", dead)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: results store postgresql+psycopg://postgres@127.0.0.1:1/none "
                          "cannot be reached: ")


def test_a_version_1_store_is_brought_up_to_version_2_on_postgresql(tmp_path, url, capsys):
    from tests.unit.test_certify_baselines import a_sweep
    from tests.unit.test_store_certifications import as_version_1, certification, stored_figures
    assert run(capsys, "store", "add", a_sweep(tmp_path, "old"), "--store", url)[0] == 0
    as_version_1(url)
    code, out, err = run(capsys, "store", "add", certification(tmp_path, "c1", T0), "--store", url)
    assert code == 0 and "added certification c1@" in out, err
    figures = stored_figures(url, "old")
    assert {p[:3]: f["bench"] for p, f in figures.items()} == {"000": "train", "001": "comm", "002": "checkpoint"}
    assert figures["001-comm-pytorch-float32-1x2"]["throughput"] is None
    code, out, _ = run(capsys, "history", "--store", url)
    assert out.startswith("# Certifications") and "| PASS " in out


def test_a_password_protected_role_connects_with_its_password_in_no_file(tmp_path, url, capsys,
                                                                         monkeypatch):
    """store.url recorded without its password (point.json holds `bench:***@`): the store still
    connects where libpq finds the password, PGPASSWORD, a password file (~/.pgpass,
    PGPASSFILE), a service file (PGSERVICEFILE), or DLBENCH_STORE; no message, --help, sweep
    file or row of the store holds it (tests/secret_search.py)."""
    bench = sa.engine.make_url(postgres_server.password_role(url, PASSWORD))
    with_password = bench.set(password=PASSWORD).render_as_string(hide_password=False)
    s = sweep(tmp_path, "A", T0, [1.0])
    path = os.path.join(s, "points", POINT, "point.json")
    point = json.load(open(path))
    records.write_json_atomic(path, dict(point, cluster={"store": {"url": with_password}}))
    assert json.load(open(path))["cluster"]["store"]["url"] == \
        f"postgresql+psycopg://bench:***@127.0.0.1:{bench.port}/dlbench"
    monkeypatch.delenv("DLBENCH_STORE", raising=False)   # the site's store.url is the store
    outs = []

    def analysis(*argv):
        code, out, err = run(capsys, *argv)
        outs.extend((out, err))
        return code, out, err

    code, out, err = analysis("report", s, "--no-plot")   # no password anywhere: refused, said
    assert code == 0 and "warning: the results store was not written: " in err
    assert "password" in err and f"bench:***@127.0.0.1:{bench.port}" in err
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    code, out, err = analysis("report", s, "--no-plot")
    shown = f"postgresql+psycopg://bench:***@127.0.0.1:{bench.port}/dlbench"
    assert code == 0 and f"store {shown}: added A@" in out, err
    monkeypatch.delenv("PGPASSWORD")
    home = tmp_path / "home"   # the user's own files: ~/.pgpass, ~/.pg_service.conf
    home.mkdir()
    pgpass = home / ".pgpass"
    pgpass.write_text(f"127.0.0.1:{bench.port}:dlbench:bench:{PASSWORD}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    assert "unchanged A@" in analysis("store", "add", s, "--store", str(bench))[1]
    service = home / ".pg_service.conf"
    service.write_text(f"[dlbench]\nhost=127.0.0.1\nport={bench.port}\ndbname=dlbench\nuser=bench\n")
    monkeypatch.setenv("PGSERVICEFILE", str(service))
    code, out, _ = analysis("store", "list", "--store", "postgresql+psycopg:///?service=dlbench")
    assert code == 0 and "| A@" in out
    monkeypatch.delenv("PGPASSFILE")
    monkeypatch.setenv("DLBENCH_STORE", with_password)     # the whole URL from the environment
    code, out, _ = analysis("store", "list")
    assert code == 0 and "| A@" in out and "bench:***@" in out
    wrong = bench.set(password="Wr0ng-" + PASSWORD[::-1]).render_as_string(hide_password=False)
    code, _, err = analysis("store", "list", "--store", wrong)
    assert code == 2 and "password authentication failed" in err and "Wr0ng-" not in err
    for argv in (["report", "--help"], ["store", "add", "--help"], ["history", "--help"]):
        with pytest.raises(SystemExit):
            analysis(*argv)
    outs.append(capsys.readouterr().out)
    assert secret_search.found([s], texts=[postgres_server.dump(url), *outs]) == []
