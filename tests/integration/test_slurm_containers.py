"""Ranks inside a real container image on the real local Slurm cluster: the suite's test
image (Debian 12 with its own Python 3.11.2 and torch 2.13.0; tests/container_image, `make
image`), started in every task by Charliecloud's ch-run (cluster=localtest_charliecloud,
docs/containers.md). A 2-node x 2-rank ResNet-50 (tiny) and the GPT layouts' tp2 point train
inside it; the records name the image and its digest; the ranks rendezvous across nodes.
No mock of Slurm or of the runtime."""
import glob
import hashlib
import json
import shutil
import subprocess
import sys

import pytest

from launchers.backends import containers
from launchers.suite import ROOT
from tests.launching import analysis, launch

pytestmark = pytest.mark.slurm
RESNET, GPT = "000-pytorch-resnet50-fp32-2x2-bs4", "000-pytorch-gpt-fp32-1x2-bs8-tp2"


def site(image):
    return ["launcher=slurm", "cluster=localtest_charliecloud", f"cluster.containers.pytorch={image}"]


def ranks(sweep, point):
    return [json.load(open(p)) for p in sorted(glob.glob(f"{sweep}/points/{point}/repeat-00/rank-*.json"))]


@pytest.fixture(scope="module")
def sweep(slurm_cluster, test_image, tmp_path_factory):
    folder = tmp_path_factory.mktemp("in-image")
    for args in (["preset=smoke", "nodes=2", "gpus_per_node=2", "repeats=1"],
                 ["gpt_case_tiny=MP_1x2x1_8_64x4", "warmup_steps=2", "measure_steps=3", "repeats=1",
                  "timeout_s=300", "rendezvous_timeout_s=60"]):
        res = launch(*site(test_image), *args, f"hydra.run.dir={folder}", timeout=120)
        assert res.returncode == 0, res.stderr[-3000:]
    waited = launch("status", str(folder), "--wait", "--timeout", "600", "--interval", "1", timeout=660)
    with open(test_image + ".json") as f:
        built = json.load(f)  # what the image's build found in it: its torch and Python
    return {"dir": folder, "status": waited, "image": test_image, "built": built}


def test_the_points_complete_in_the_image(sweep):
    assert sweep["status"].returncode == 0, sweep["status"].stdout + sweep["status"].stderr
    for point in (RESNET, GPT):
        step = json.load(open(f"{sweep['dir']}/points/{point}/repeat-00/step.json"))
        runtime = step["argv"][step["argv"].index("ch-run"):]
        assert runtime[runtime.index("--") - 1] == sweep["image"], runtime
        assert runtime[runtime.index("--") + 1:][:3] == ["python3", "-m", "frameworks"]
        # its mount point made by each task before ch-run (docs/containers.md, "Ranks that start together")
        assert step["argv"][step["argv"].index("ch-run") - 1] == runtime[1].removeprefix("--mount=")


def test_ranks_run_the_images_python_and_torch_not_the_hosts(sweep):
    recs = ranks(sweep["dir"], RESNET) + ranks(sweep["dir"], GPT)
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    for rec in recs:
        env = rec["environment"]
        assert env["python_executable"] == "/usr/bin/python3"  # the image's, not the checkout's venv
        assert env["python"] == sweep["built"]["python"] != sys.version.split()[0]
        assert rec["framework"]["version"] == sweep["built"]["torch"]


def test_every_record_names_the_image_and_its_digest(sweep):
    h = hashlib.sha256()
    with open(sweep["image"], "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    want = {"runtime": "charliecloud", "image": sweep["image"], "digest": "sha256:" + h.hexdigest(),
            "digest_of": "the image file (sha256)", "why": None}
    for point in (RESNET, GPT):
        assert all(r["container"] == want for r in ranks(sweep["dir"], point))
        assert json.load(open(f"{sweep['dir']}/points/{point}/point.json"))["container"] == want


def test_ranks_find_each_other_across_nodes(sweep):
    recs = ranks(sweep["dir"], RESNET)
    assert [r["rank"] for r in recs] == [0, 1, 2, 3] and {r["world_size"] for r in recs} == {4}
    assert len({r["host"] for r in recs}) == 2
    step = json.load(open(f"{sweep['dir']}/points/{RESNET}/repeat-00/step.json"))
    assert step["env"]["MASTER_ADDR"] == recs[0]["host"]


def test_the_gpt_tp2_point_splits_its_layers_in_the_image(sweep):
    recs = ranks(sweep["dir"], GPT)
    assert [r["parallel"]["layout"]["tp"] for r in recs] == [2, 2]
    losses = [[s["loss"] for s in r["steps"]] for r in recs]
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)  # one model, split over two ranks


def test_status_and_the_report_as_without_containers(sweep):
    assert "COMPLETED" in sweep["status"].stdout and RESNET in sweep["status"].stdout
    res = analysis("report", str(sweep["dir"]), "--no-plot")
    assert res.returncode == 0, res.stderr
    digest = json.load(open(f"{sweep['dir']}/points/{GPT}/point.json"))["container"]["digest"]
    line = f"  charliecloud {sweep['image']} (sha256:{digest.split(':')[1][:12]}): "
    assert line in res.stdout and GPT in res.stdout.split(line)[1].splitlines()[0]


# ---- refused before anything runs -------------------------------------------------------------
def refused(tmp_path, *overrides):
    res = launch("launcher=slurm", "cluster=localtest_charliecloud", "preset=smoke",
                 *overrides, f"hydra.run.dir={tmp_path}", timeout=120)
    assert res.returncode == 2 and not (tmp_path / "points").exists(), res.stdout + res.stderr
    return res.stderr.strip()


@pytest.mark.skipif(not shutil.which("ch-run"), reason="charliecloud not installed (make image-deps)")
def test_a_missing_image_or_runtime_is_one_line_before_anything_runs(slurm_cluster, tmp_path):
    assert refused(tmp_path, "cluster.containers.pytorch=/nonexistent/pt.sqfs") == (
        "error: cluster.containers.pytorch=/nonexistent/pt.sqfs: no such image here "
        "(cluster.container_runtime=charliecloud)")
    assert refused(tmp_path, "cluster.containers.pytorch=/x.sif", "cluster.container_runtime=apptainer") == (
        "error: cluster.container_runtime=apptainer: apptainer is not on PATH here")
    assert refused(tmp_path, "cluster.containers.pytorch='nvcr.io#nvidia/pytorch:24.05-py3'",
                   "cluster.container_runtime=pyxis") == (
        "error: cluster.container_runtime=pyxis: srun here has no --container-image option "
        "(`srun --help`: pyxis is not installed)")


@pytest.mark.skipif(not (shutil.which("mksquashfs") and shutil.which("ch-run")),
                    reason="charliecloud or squashfs-tools not installed (make image-deps)")
@pytest.mark.skipif(containers.under_tmp(ROOT), reason="the checkout is under /tmp, which ch-run "
                    "binds itself: an image needs no directory for it, so there is nothing to refuse")
def test_an_image_without_a_directory_for_the_checkout_is_refused(slurm_cluster, tmp_path):
    tree = tmp_path / "tree"
    (tree / "usr" / "bin").mkdir(parents=True)
    image = tmp_path / "bare.sqfs"
    subprocess.run(["mksquashfs", str(tree), str(image), "-quiet", "-no-progress"], check=True)
    assert refused(tmp_path / "sweep", f"cluster.containers.pytorch={image}") == (
        f"error: cluster.containers.pytorch={image}: the image has no directory {ROOT} to bind "
        "the host's at (ch-run makes none in a read-only image; add it to the image's recipe)")
