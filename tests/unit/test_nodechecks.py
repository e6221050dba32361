"""The node checks (healthchecks/nodechecks.py) on files laid out as the kernel lays them
out, real scripts and this machine: each says ok, sick with its reason, or skipped with why."""
import stat

import pytest

from healthchecks import nodechecks

SETTINGS = {"min_fraction": 0.8, "gpus_per_node": 2, "checks": list(nodechecks.CHECKS),
            "cpu_governor": "performance", "site_checks": [], "nccl_env": {}}


def port(root, dev, n, state, rate, layer="InfiniBand"):
    base = root / dev / "ports" / str(n)
    base.mkdir(parents=True)
    (base / "state").write_text(state + "\n")
    (base / "rate").write_text(rate + "\n")
    (base / "link_layer").write_text(layer + "\n")


def test_infiniband_ports_active_or_named_down(tmp_path):
    port(tmp_path, "mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)")
    port(tmp_path, "mlx5_1", 1, "4: ACTIVE", "200 Gb/sec (4X HDR)")
    ok = nodechecks.infiniband(SETTINGS, root=str(tmp_path))
    assert ok["status"] == "ok" and ok["value"] == 200.0  # the slowest port, for the median
    port(tmp_path, "mlx5_2", 1, "1: DOWN", "10 Gb/sec (4X SDR)")
    assert nodechecks.infiniband(SETTINGS, root=str(tmp_path))["reason"] == "mlx5_2 port 1: 1: DOWN"
    with pytest.raises(nodechecks.Skip, match="no InfiniBand device in"):
        nodechecks.infiniband(SETTINGS, root=str(tmp_path / "none"))


def test_the_cpu_governor(tmp_path):
    for cpu, gov in enumerate(["performance", "powersave", "performance", "powersave"]):
        (tmp_path / f"cpu{cpu}" / "cpufreq").mkdir(parents=True)
        (tmp_path / f"cpu{cpu}" / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    pattern = str(tmp_path / "cpu[0-9]*" / "cpufreq" / "scaling_governor")
    assert nodechecks.governor(SETTINGS, pattern)["reason"] == "2 of 4 CPUs run 'powersave', not 'performance'"
    assert nodechecks.governor(dict(SETTINGS, cpu_governor="powersave"), pattern)["status"] == "sick"
    with pytest.raises(nodechecks.Skip, match="no cpufreq governor"):
        nodechecks.governor(SETTINGS, str(tmp_path / "nothing" / "*"))


def test_memory_and_shm_report_values_for_the_median(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n")
    mem = nodechecks.memory(SETTINGS, str(tmp_path / "meminfo"))
    assert mem["status"] == "ok" and mem["value"] == 8000000 * 1024 and mem["total"] == 16000000 * 1024
    assert nodechecks.shm(SETTINGS, str(tmp_path))["value"] > 0
    gone = nodechecks.shm(SETTINGS, str(tmp_path / "no-shm"))
    assert gone["status"] == "sick" and gone["reason"].startswith(f"no {tmp_path / 'no-shm'}")


def test_the_sites_nccl_settings_as_the_rank_got_them(monkeypatch):
    want = dict(SETTINGS, nccl_env={"NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "ib0"})
    monkeypatch.setenv("NCCL_IB_HCA", "mlx5")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    assert nodechecks.nccl_env(want)["reason"] == "NCCL_SOCKET_IFNAME=eth0, the site sets ib0"
    monkeypatch.delenv("NCCL_IB_HCA")
    assert nodechecks.nccl_env(want)["reason"].startswith("NCCL_IB_HCA missing")
    with pytest.raises(nodechecks.Skip, match="sets no NCCL"):
        nodechecks.nccl_env(SETTINGS)


def script(path, body):
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_sites_own_checks_are_scripts_whose_exit_says(tmp_path):
    good = script(tmp_path / "good.sh", "echo fine")
    bad = script(tmp_path / "bad.sh", "echo checking; echo 'eth0 has 3 CRC errors' >&2; exit 3")
    assert nodechecks.site(dict(SETTINGS, site_checks=[good]))["status"] == "ok"
    out = nodechecks.site(dict(SETTINGS, site_checks=[good, bad, str(tmp_path / "missing.sh")]))
    assert out["status"] == "sick"
    assert f"{bad} exited 3: eth0 has 3 CRC errors" in out["reason"]
    assert f"{tmp_path / 'missing.sh'}: cannot run it" in out["reason"]


def nvml_here() -> bool:
    try:
        nodechecks.nvml()
        return True
    except nodechecks.Skip:
        return False


@pytest.mark.skipif(nvml_here(), reason="this machine has a GPU that NVML sees")
def test_on_a_cpu_every_check_that_cannot_apply_says_why(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no scontrol, no nvidia-smi: a plain CPU host
    out = nodechecks.run_node(SETTINGS, "somehost")
    for name in nodechecks.NVML_CHECKS:
        assert out[name]["status"] == "skipped" and out[name]["reason"].startswith("no GPU: NVML checks skipped")
    assert out["devices"] == nodechecks.skipped("no GPU: device count and model not checked")
    assert out["versions"] == nodechecks.skipped("no GPU: no driver, CUDA or NCCL version to compare")
    assert out["memory"]["status"] == "ok" and out["shm"]["status"] == "ok"
    assert all(r["status"] in ("ok", "skipped") and r["reason"] for r in out.values())


def test_a_check_not_asked_for_says_so_and_one_that_breaks_is_sick(monkeypatch):
    out = nodechecks.run_node(dict(SETTINGS, checks=["memory"]), "h")
    assert out["shm"] == nodechecks.skipped("not asked (health.checks)")

    def broken(settings):
        raise OSError("unexpected")
    monkeypatch.setattr(nodechecks, "shm", broken)
    assert nodechecks.run_node(SETTINGS, "h")["shm"] == nodechecks.sick("the check failed: OSError: unexpected")


def test_the_matrix_multiply_measures_this_cpu():
    out = nodechecks.matmul(dict(SETTINGS, matmul_n=64, matmul_s=0.05), "cpu")
    assert out["status"] == "ok" and out["value"] > 0 and out["unit"] == "GFLOP/s"


@pytest.mark.parametrize("line,gres", [
    # as the test cluster's scontrol prints a node (cut short), and as sites with typed GPUs do
    ("NodeName=node3 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 Gres=gpu:1 NodeAddr=10.78.0.13", (1, None)),
    ("NodeName=g001 Gres=gpu:h100:8(S:0-1) GresDrain=N/A", (8, "h100")),
    ("NodeName=g002 Gres=shard:16,gpu:a100:4(S:0) State=IDLE", (4, "a100")),
    ("NodeName=c001 Gres=(null) State=IDLE", None),
])
def test_the_gpus_a_slurm_node_registered(line, gres):
    """Without NVML or CUDA a node's GPUs are what its slurmd registered (the test cluster's
    fake GPUs): the count is read from `scontrol show node -o` (asked for real in
    tests/integration/test_health_slurm.py)."""
    assert nodechecks.gpu_gres(line) == gres


def test_the_throttle_bits_are_nvmls():
    """nodechecks names NVML's clocks event reason bits without importing it (a CPU node has
    no NVML); they are the ones nvidia-ml-py defines."""
    import pynvml
    assert nodechecks.BAD_THROTTLE == {
        pynvml.nvmlClocksEventReasonHwSlowdown: "hardware slowdown",
        pynvml.nvmlClocksThrottleReasonSwThermalSlowdown: "software thermal slowdown",
        pynvml.nvmlClocksThrottleReasonHwThermalSlowdown: "hardware thermal slowdown",
        pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown: "hardware power brake"}


def test_a_value_nvml_may_not_read_here_skips_and_never_makes_the_node_sick():
    """On a GPU in a container or a virtual machine NVML may refuse a query (no permission), and
    an older driver may lack a call: the check then cannot apply on that GPU, said, while the
    GPUs where it reads are still judged. nvidia-ml-py's own errors; a node of two GPUs stands in
    for NVML's device handles (no GPU here)."""
    import types

    import pynvml
    nv = types.SimpleNamespace(nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: i,
                               **{name: getattr(pynvml, name) for name in nodechecks.UNREADABLE})

    def refused(h):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)

    with pytest.raises(nodechecks.Skip, match="not readable on this node's GPUs"):
        nodechecks._per_device(nv, refused)

    def second_only(h):
        if h == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return 1410
    assert nodechecks._per_device(nv, second_only) == [(1, 1410)]
