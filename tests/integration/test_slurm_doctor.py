"""`python -m launch doctor` (launchers/commands/doctor.py) against the real local Slurm
cluster: it passes there, with the PyTorch image run by ch-run on a node; it names a partition
that does not exist, NCCL settings the nodes do not have, GPUs they lack and an image that
cannot bind the checkout; and it leaves no job in the queue."""
import json
import shutil
import subprocess

import pytest

from launchers.backends import containers
from launchers.suite import ROOT
from tests.launching import launch

pytestmark = pytest.mark.slurm


def doctor(tmp_path, *overrides):
    res = launch("doctor", "cluster=localtest", f"output_root={tmp_path / 'out'}", *overrides,
                 timeout=600)
    lines = {}
    for line in res.stdout.splitlines()[:-1]:
        status, _, rest = line.partition(" ")
        check, _, detail = rest.strip().partition(": ")
        lines[check] = (status, detail)
    return res, lines


def doctor_jobs() -> list:
    out = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, timeout=60)
    return [name for name in out.stdout.split() if name.startswith("dlbench-doctor-")]


def test_it_passes_on_the_test_cluster_with_the_image(slurm_cluster, test_image, tmp_path):
    res, lines = doctor(tmp_path, "cluster=localtest_charliecloud",
                        f"cluster.containers.pytorch={test_image}")
    assert res.returncode == 0, res.stdout + res.stderr
    assert [c for c, (s, _) in lines.items() if s == "ok"] == ["slurm", "submit", "node", "gres",
                                                               "image pytorch", "versions pytorch"], res.stdout
    assert lines["nccl"][0] == "skipped"
    torch = json.load(open(test_image + ".json"))["torch"]
    assert lines["image pytorch"][1] == (f"charliecloud ran {test_image} on a node: pytorch {torch} "
                                         "imports there")
    # the image's torch against the adapter's releases (contract/versions.py), its metadata read
    assert lines["versions pytorch"][1].startswith(f"torch {torch} (>= 2.11.0; tested 2.11.0, 2.13.0); "), \
        lines["versions pytorch"]
    assert "torchtitan not found (needed on torchtitan's path" in lines["versions pytorch"][1]
    assert lines["node"][1].endswith(f"sees the checkout {ROOT} and writes to the output folder "
                                     f"{tmp_path / 'out'}")
    assert res.stdout.splitlines()[-1].startswith("doctor: ok in ")
    assert doctor_jobs() == []


def test_a_partition_that_does_not_exist_is_named(slurm_cluster, tmp_path):
    res, lines = doctor(tmp_path, "cluster.partition=nope")
    assert res.returncode == 1
    assert lines["submit"] == ("FAILED", "sbatch --test-only refused partition nope, account "
                               "(default), qos (default): invalid partition specified: nope")
    assert doctor_jobs() == []


def test_nccl_settings_and_gpus_the_nodes_lack_are_failures(slurm_cluster, tmp_path):
    res, lines = doctor(tmp_path, "+cluster.env.NCCL_SOCKET_IFNAME=ib0", "cluster.max_gpus_per_node=4")
    assert res.returncode == 1
    status, detail = lines["nccl"]
    assert status == "FAILED" and detail.endswith(
        "NCCL_SOCKET_IFNAME=ib0 names none of the node's interfaces (eth0, lo)"), detail
    assert lines["gres"][0] == "FAILED" and "never starts" in lines["gres"][1]
    assert lines["image"][0] == "skipped"  # cluster=localtest names no image
    res, lines = doctor(tmp_path, "+cluster.env.NCCL_SOCKET_IFNAME=eth")
    assert res.returncode == 0 and lines["nccl"][0] == "ok", res.stdout


@pytest.mark.skipif(not (shutil.which("mksquashfs") and shutil.which("ch-run")),
                    reason="charliecloud or squashfs-tools not installed (make image-deps)")
@pytest.mark.skipif(containers.under_tmp(ROOT), reason="the checkout is under /tmp, which ch-run "
                    "binds itself: an image needs no directory for it, so there is nothing to refuse")
def test_an_image_that_cannot_bind_the_checkout_fails_its_line(slurm_cluster, tmp_path):
    (tmp_path / "tree" / "usr").mkdir(parents=True)
    image = tmp_path / "bare.sqfs"
    subprocess.run(["mksquashfs", str(tmp_path / "tree"), str(image), "-quiet", "-no-progress"],
                   check=True)
    res, lines = doctor(tmp_path, "cluster=localtest_charliecloud", f"cluster.containers.pytorch={image}")
    assert res.returncode == 1
    assert lines["image pytorch"] == ("FAILED", f"cluster.containers.pytorch={image}: the image has "
                                      f"no directory {ROOT} to bind the host's at (ch-run makes none "
                                      "in a read-only image; add it to the image's recipe)")
