"""PyTorch trains from files through `python -m launch` (data=files): a smoke point, two
ranks reading disjoint shards, the pipeline alone (bench=input) measuring a rate, the
report's side-by-side table, and a corrupt JPEG failing the rank with the file named."""
import glob
import json
import os
import shutil

import pytest

import analysis
from analysis.sections import input_pipeline
from analysis.report import contents as report
from frameworks.common import datafiles
from contract import paths
from tests.launching import launch

pytestmark = pytest.mark.e2e
IMAGES = 24




def records(sweep, name):
    """The rank records of repeat 0 of the point named NNN-<name>."""
    [pdir] = [p for p in glob.glob(f"{sweep}/points/*") if os.path.basename(p)[4:] == name]
    return [json.load(open(f)) for f in sorted(glob.glob(f"{pdir}/{paths.repeat_name(0)}/"
                                                         f"{paths.rank_record_name(0)[:5]}*.json"))]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "ds"
    res = launch("dataset", str(out), "--images", str(IMAGES), "--classes", "3", "--sequences", "16")
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def sweep(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    smoke, files = ["preset=smoke", "repeats=1"], ["data=files", f"data.path={data}", "data.workers=1"]
    for args in (["-m", *smoke, *files, "gpus_per_node=1,2", f"hydra.sweep.dir={out}"],
                 [*smoke, *files, "bench=input", f"hydra.run.dir={out}"],
                 [*smoke, f"hydra.run.dir={out}"]):  # synthetic, to compare
        res = launch(*args)
        assert res.returncode == 0, res.stderr[-3000:]
    return out


def test_a_smoke_point_trains_from_files(sweep):
    [rec] = records(sweep, "pytorch-resnet50-fp32-1x1-bs4-files-w1")
    assert rec["status"] == "ok" and rec["spec"]["point"].startswith("000-pytorch-resnet50")
    assert rec["data"]["source"] == "files" and rec["data"]["backend"] == "torch"
    assert rec["data"]["workers"] == 1 and rec["data"]["samples_read"] == 4 * 7
    assert all(s["loss"] > 0 for s in rec["steps"])
    [syn] = records(sweep, "pytorch-resnet50-fp32-1x1-bs4")
    assert syn["data"] == {"source": "synthetic", "path": None, "backend": None, "workers": 0}


def test_two_ranks_read_disjoint_shards(sweep):
    recs = records(sweep, "pytorch-resnet50-fp32-1x2-bs4-files-w1")
    assert [r["status"] for r in recs] == ["ok", "ok"]
    # 28 samples each from a shard of 12: the loader wrapped around, and together the
    # ranks saw every image once: digests XOR to the whole set's, counts add up.
    assert [r["data"]["ids_distinct"] for r in recs] == [IMAGES // 2] * 2
    assert all(r["data"]["samples_read"] == 28 for r in recs)
    both = int(recs[0]["data"]["ids_digest"], 16) ^ int(recs[1]["data"]["ids_digest"], 16)
    assert both == int(datafiles.ids_digest(range(IMAGES)), 16)


def test_the_pipeline_alone_measures_a_rate_and_the_report_compares(sweep):
    [rec] = records(sweep, "input-pytorch-resnet50-fp32-1x1-bs4-files-w1")
    assert rec["status"] == "ok" and len([s for s in rec["steps"] if s["phase"] == "measure"]) == 5
    res = analysis.load(sweep)
    inputs = res.points[res.points.bench == "input"]
    rates = input_pipeline.pipeline_rates(res, inputs)
    assert list(rates) == list(inputs.point) and all(r > 0 for r in rates.values())
    text = report.render(res)
    section = text[text.index("## Input pipeline"):]
    [row] = [line for line in section.splitlines() if line.startswith("| pytorch") and "| 1x1 " in line
             and "| 1 " in line and "input-bound" in line]
    synthetic, files, alone = [float(c) for c in row.split("|")[8:11]]
    assert synthetic > 0 and files > 0 and alone == pytest.approx(rates[inputs.point.iloc[0]], rel=0.05)
    # the main throughput table keeps training on synthetic data only
    main = text[text.index("## resnet50"):text.index("## Input pipeline")]
    assert "| 1x2 " not in main.split("###")[1].splitlines()[2]


def test_a_corrupt_jpeg_fails_the_rank_with_the_file_named(data, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(data, broken)
    bad = sorted(glob.glob(f"{broken}/{paths.IMAGES_DIR}/*/*.JPEG"))[5]
    with open(bad, "r+b") as f:  # a torn file: its header is kept, the rest is gone
        f.truncate(600)
    res = launch("bench=input", "data=files", f"data.path={broken}", "data.workers=1", "preset=smoke",
                 "repeats=1", "warmup_steps=0", "measure_steps=8", f"hydra.run.dir={tmp_path}/s")
    assert res.returncode == 1, res.stderr[-2000:]   # a point that did not pass
    [rec] = records(f"{tmp_path}/s", "input-pytorch-resnet50-fp32-1x1-bs4-files-w1")
    assert rec["status"] == "failed"
    assert rec["error"].startswith(f"CorruptFile: cannot decode {bad}: ") and "\n" not in rec["error"]
    assert os.path.exists(bad)
