"""Sweeps written before the secret rule, by the suite of 2026-11-27 (tests/unit/data/
secrets-2026-11-27: a local sweep and one on the Slurm test cluster, a password in store.url
and HF_TOKEN in cluster.env, in plain text in multirun.yaml, point.json, spec.json, the rank
records and step.json): archived without them (masked, each file and field named in the
manifest; a binary file that holds one left out; refused where masking would change
figures), and their report, store rows and `launch status` show none."""
import json
import os
import pickle
import shutil
from pathlib import Path

import pandas as pd
import pytest

import analysis
from analysis.read import archive
from launchers.commands import status
from tests import secret_search
from tests.store_scenario import run

DATA = Path(__file__).parent / "data" / "secrets-2026-11-27"
OLD = ("hf_OldSweepToken0123456789", "OldS3cretPW")
POINT = "points/000-pytorch-resnet50-fp32-1x1-bs4"


def old(tmp_path, name="local-sweep") -> str:
    shutil.copytree(DATA / name, tmp_path / name)
    return str(tmp_path / name)


def test_the_fixtures_hold_the_secrets_they_were_written_with():
    for name in ("local-sweep", "slurm-sweep"):
        assert {v for _, v in secret_search.found([DATA / name], values=OLD)} == set(OLD)


@pytest.mark.parametrize("name,fields", [
    ("local-sweep", {"overrides.5", "overrides.6"}),
    ("slurm-sweep", {"overrides.7", "overrides.8"}),
])
def test_an_old_sweep_is_archived_masked_and_reports_the_same(tmp_path, capsys, name, fields):
    s = old(tmp_path, name)
    code, out, err = run(capsys, "archive", s)
    assert code == 0, err
    assert "secrets masked (a sweep written before they were; archive.json's `masked`)" in out
    assert secret_search.found([s + ".tar.zst"], values=OLD) == []
    with archive.unpacked(s + ".tar.zst") as (folder, damaged):
        manifest = json.load(open(os.path.join(folder, "archive.json")))
    assert damaged == {} and manifest["withheld"] == []
    env = {"cluster.env.HF_TOKEN", "cluster.store.url"}
    masked = {f"{POINT}/point.json": env | {"config." + f for f in env} | fields,
              f"{POINT}/repeat-00/spec.json": {"config." + f for f in env},
              f"{POINT}/repeat-00/rank-00000.json": {"spec.config." + f for f in env},
              "multirun.yaml": {"(text)"}}
    if name == "slurm-sweep":
        masked[f"{POINT}/repeat-00/step.json"] = {"env.HF_TOKEN"}
    assert {k: set(v) for k, v in manifest["masked"].items()} == masked
    # the figures are those of the folder: masking changed none
    assert run(capsys, "report", s, "--no-plot", "--store", "off")[0] == 0
    code, _, err = run(capsys, "report", s + ".tar.zst", "--no-plot", "--store", "off")
    assert code == 0, err
    for csv in ("points.csv", "runs.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(f"{s}/report/{csv}").drop(columns="sweep"),
                                      pd.read_csv(f"{s}-report/{csv}").drop(columns="sweep"))
    assert secret_search.found([f"{s}/report", f"{s}-report"], values=OLD) == []


def test_a_binary_file_that_holds_one_is_left_out(tmp_path, capsys):
    s = old(tmp_path, "slurm-sweep")
    with open(f"{s}/slurm/9_submitted.pkl", "wb") as f:   # a search's driver carried its point
        pickle.dump({"cluster": {"env": {"HF_TOKEN": OLD[0]}}}, f)
    code, out, _ = run(capsys, "archive", s)
    assert code == 0 and "left out, binary files holding a secret: slurm/9_submitted.pkl" in out
    assert secret_search.found([s + ".tar.zst"], values=OLD) == []
    with archive.unpacked(s + ".tar.zst") as (folder, damaged):
        manifest = json.load(open(os.path.join(folder, "archive.json")))
        assert not os.path.exists(os.path.join(folder, "slurm", "9_submitted.pkl"))
    assert manifest["withheld"] == ["slurm/9_submitted.pkl"]
    assert "slurm/1_submitted.pkl" in manifest["files"]   # the plain driver's: its point's folder only


def test_masking_that_would_change_figures_is_refused_naming_the_file_and_field(tmp_path, capsys):
    s = old(tmp_path)
    path = f"{s}/{POINT}/point.json"
    point = json.load(open(path))
    point["model"]["auth_token"] = OLD[0]           # a model setting the FLOP count could read
    json.dump(point, open(path, "w"))
    code, _, err = run(capsys, "archive", s)
    assert code == 2 and err == (f"error: cannot archive {POINT}/point.json without its secret in "
                                 "model.auth_token: masking it would change what the figures read "
                                 "(contract/secrets.py)\n")
    assert not os.path.exists(s + ".tar.zst") and not os.path.exists(s + ".tar.zst.part")


def test_its_report_store_and_status_show_none(tmp_path, capsys):
    s = old(tmp_path)   # local: neither the report nor status asks Slurm about its jobs
    rdir = f"{s}/{POINT}/repeat-00"
    failed = dict(json.load(open(f"{rdir}/run.json")), status="failed",
                  error=f"rank 0: HTTPError: 401 for token {OLD[0]}",
                  log_tail={"rank": 0, "lines": [f"HF_TOKEN={OLD[0]}",
                                                 f"postgresql://bench:{OLD[1]}@db/dlbench"]})
    json.dump(failed, open(f"{rdir}/run.json", "w"))
    store = tmp_path / "results.sqlite"
    code, out, err = run(capsys, "report", s, "--no-plot", "--store", store)
    assert code == 0 and "401 for token ***" in out and "added local-sweep@" in out, err
    assert status.main([s]) == 0
    shown = capsys.readouterr().out
    assert "401 for token ***" in shown and "postgresql://bench:***@db/dlbench" in shown
    results = analysis.load(s)
    assert results.runs.iloc[0].error == "rank 0: HTTPError: 401 for token ***"
    manifest = results.manifest(s, os.path.basename(POINT))
    assert manifest["cluster"]["store"]["url"] == "postgresql+psycopg://bench:***@127.0.0.1:1/dlbench"
    assert secret_search.found([f"{s}/report", store], texts=[out, shown, repr(results.manifests)],
                               values=OLD) == []
