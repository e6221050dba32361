"""What a rank record says about the machine, what it never says (secrets), and the
report's Environment block built from it."""
import json
import os

import analysis
from analysis.sections import environment as env_block
from analysis.report import contents as report
from frameworks.common import environment, harness
from frameworks.common.distenv import DistEnv
from tests.sweepfiles import write_point, write_repeat
from tests.runspecs import run_spec, stand_in
from tests.unit.test_harness import SPEC, Counting

SECRETS = {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-secret-1", "MY_TOKEN": "tok-secret-2",
           "GITHUB_TOKEN": "ghp-secret-3", "DB_PASSWORD": "pw-secret-4",
           "NCCL_FAKE_TOKEN": "nccl-secret-5", "MS_API_KEY": "ms-secret-6"}


def test_secrets_never_reach_a_record(monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    rec = harness.run(stand_in(Counting), run_spec(SPEC), DistEnv(0, 1, 0, 1, "h", 1))[0]
    assert rec["status"] == "ok"
    text = json.dumps(rec, default=str)
    for k, v in SECRETS.items():
        assert k not in text and v not in text
    assert rec["environment"]["env"]["NCCL_SOCKET_IFNAME"] == "ib0"   # allowlisted: kept


def test_allowlist_then_denylist():
    got = environment.allowed_env({"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "HOME": "/root",
                                   "AWS_SECRET_ACCESS_KEY": "x", "NCCL_PASSWORD": "y",
                                   "SLURM_JOB_ID": "7", "UCX_AUTH_COOKIE": "z"})
    assert got == {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "SLURM_JOB_ID": "7"}


def test_host_facts():
    facts = environment.capture(topology=True)
    for key in ("host", "cpu", "cpu_count", "memory_bytes", "nvidia_driver", "gpus",
                "infiniband", "infiniband_ports", "env", "gpu_topology"):
        assert key in facts
    assert facts["memory_bytes"] > 0 and isinstance(facts["gpus"], list)


def test_infiniband_ports_from_sysfs(tmp_path):
    for dev, rate in (("mlx5_0", "200 Gb/sec (4X HDR)"), ("mlx5_1", "200 Gb/sec (4X HDR)")):
        port = tmp_path / dev / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text("4: ACTIVE\n")
        (port / "rate").write_text(rate + "\n")
        (port / "link_layer").write_text("InfiniBand\n")
    ports = environment.infiniband_ports(str(tmp_path))
    assert ports[0] == {"device": "mlx5_0", "port": "1", "state": "4: ACTIVE",
                        "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand"}
    assert len(ports) == 2 and environment.infiniband_ports(str(tmp_path / "none")) == []


TOPO = """\
        GPU0    GPU1    GPU2    GPU3    mlx5_0  CPU Affinity
GPU0     X      NV1     NV1     NV2     NODE    0-11,24-35
GPU1    NV1      X      NV2     NV1     NODE    0-11,24-35
GPU2    NV1     NV2      X      NV2     PIX     0-11,24-35
GPU3    NV2     NV1     NV2      X      PIX     0-11,24-35
mlx5_0  NODE    NODE    PIX     PIX      X

Legend:

  X    = Self
"""


def test_topology_summary():
    assert env_block.topology_summary(TOPO) == "NVLink between GPUs (NV1-NV2); NICs in topology: mlx5_0"
    pcie = "        GPU0    GPU1\nGPU0     X      PHB\nGPU1    PHB      X\n"
    assert env_block.topology_summary(pcie) == "PCIe between GPUs (PHB)"
    assert env_block.topology_summary(None) is None


def gpu_sweep(tmp_path):
    s = str(tmp_path)
    pt = write_point(s, "000-pytorch-resnet50-amp-2x2-bs8", precision="amp", nodes=2, gpus_per_node=2,
                     repeats=1)
    rdir = write_repeat(pt, 0, [1.0] * 4)
    for rank in range(4):
        path = os.path.join(rdir, f"rank-{rank:05d}.json")
        rec = json.load(open(path))
        rec["environment"] = {
            "host": rec["host"], "cpu": "Intel(R) Xeon(R) Platinum 8480+", "cpu_count": 224,
            "memory_bytes": 2048 * 2**30, "nvidia_driver": "550.54.15", "device": "NVIDIA H100 80GB HBM3",
            "device_count": 8, "cuda": "12.4", "cudnn": 90100, "nccl": "2.21.5",
            "infiniband": ["mlx5_0"], "infiniband_ports": [{"device": "mlx5_0", "port": "1",
                                                            "state": "4: ACTIVE", "link_layer": "InfiniBand",
                                                            "rate": "400 Gb/sec (4X NDR)"}]}
        if rank % 2 == 0:
            rec["environment"]["gpu_topology"] = TOPO
        json.dump(rec, open(path, "w"))
    cpu = write_point(s, "001-pytorch-resnet50-fp32-1x1-bs8", repeats=1)
    write_repeat(cpu, 0, [1.0])
    return s


def test_environment_block_per_system(tmp_path):
    text = env_block.environment_block(analysis.load(gpu_sweep(tmp_path)))
    assert text.startswith("## Environment")
    assert "system 1: 2 host(s): node1, node2" in text
    assert "NVIDIA H100 80GB HBM3 x 8 per host; driver 550.54.15, CUDA 12.4, cuDNN 90100, NCCL 2.21.5" in text
    assert "Intel(R) Xeon(R) Platinum 8480+ (224 cores, 2048 GiB)" in text
    assert "NVLink between GPUs (NV1-NV2)" in text
    assert "InfiniBand 1 port(s) on mlx5_0: InfiniBand 400 Gb/sec (4X NDR) 4: ACTIVE" in text
    assert "system 2: 1 host(s): node1" in text and "devices: cpu per host" in text
    assert "frameworks: pytorch 9.9" in text


def test_the_report_shows_it(tmp_path):
    text = report.render(analysis.load(gpu_sweep(tmp_path)))
    # the summary names the devices; the Environment section (report.html folds it) the rest
    assert "devices: NVIDIA H100 80GB HBM3" in text.split("## resnet50")[0]
    environment = text.split("## Environment")[1]
    assert "NCCL 2.21.5" in environment
