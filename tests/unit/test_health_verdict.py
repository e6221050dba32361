"""The health verdict (launchers/health/verdict.py) on rank records written by hand, against
figures worked out by hand: 3 nodes x 2 devices, health.min_fraction 0.8."""
import copy

import pytest

from healthchecks import nodechecks
from launchers.health import verdict as health_verdict

HOSTS = ["n1", "n2", "n3"]
SETTINGS = {"min_fraction": 0.8}
GIB = 2**30


def leader_checks(node: int) -> dict:
    checks = {name: nodechecks.skipped("no GPU: NVML checks skipped") for name in nodechecks.NVML_CHECKS}
    checks.update(
        devices=nodechecks.ok("2 GPU(s) (NVML)", count=2, models=["NVIDIA H100 80GB HBM3"] * 2, source="NVML"),
        versions=nodechecks.ok("driver 550.54", versions={"driver": "550.54", "cuda": "12.4", "nccl": "2.21.5"}),
        infiniband=nodechecks.ok("1 port(s) active", value=400.0, unit="Gb/s"),
        nccl_env=nodechecks.skipped("the site sets no NCCL_* variable (cluster.env)"),
        memory=nodechecks.ok("100 GiB available", value=100 * GIB, unit="bytes"),
        shm=nodechecks.ok("50 GiB free", value=50 * GIB, unit="bytes"),
        governor=nodechecks.skipped("no cpufreq governor in /sys"),
        site=nodechecks.skipped("no site check configured (health.site_checks)"))
    return checks


def links_of(node: int, seconds: dict) -> list:
    """The links node `node` received on: (src, dst, stride) -> seconds for 1e9 bytes."""
    return [{"src": s, "dst": d, "stride": k, "bytes": 10**9, "seconds": t}
            for (s, d, k), t in seconds.items() if d == node]


FAST = {(0, 1, 1): 1.0, (1, 2, 1): 1.0, (2, 0, 1): 1.0, (0, 2, 2): 1.0, (1, 0, 2): 1.0, (2, 1, 2): 1.0}


def records(gflops=(100, 100, 100, 100, 100, 100), seconds=FAST) -> dict:
    out = {}
    for rank in range(6):
        node = rank // 2
        checks = leader_checks(node) if rank % 2 == 0 else {}
        checks["matmul"] = nodechecks.ok(f"{gflops[rank]} GFLOP/s", value=float(gflops[rank]), unit="GFLOP/s")
        out[rank] = {"rank": rank, "host": HOSTS[node], "status": "ok", "error": None, "checks": checks,
                     "links": links_of(node, seconds) if rank % 2 == 0 else []}
    return out


def judge(recs, settings=SETTINGS, ended_by=None):
    return health_verdict.judge(recs, HOSTS, 2, settings, ended_by)


def test_a_healthy_allocation():
    v = judge(records())
    assert v["ok"] and v["sick"] == {} and v["exclude"] == {} and v["slow_links"] == []
    assert [n["status"] for n in v["nodes"]] == ["ok"] * 3
    assert v["medians"]["memory"] == 100 * GIB and v["medians"]["matmul"] == 100
    assert v["link_median_gbytes_s"] == 1.0 and len(v["links"]) == 6


@pytest.mark.parametrize("gib,sick", [(50, True), (79, True), (80, False), (120, False)])
def test_free_memory_against_the_median(gib, sick):
    """Medians of (100, x, 100) GiB are 100 GiB for x >= 100 or x <= 100 alike: 80 is 0.8 of it,
    not below."""
    recs = records()
    recs[2]["checks"]["memory"]["value"] = gib * GIB
    v = judge(recs)
    assert (v["nodes"][1]["checks"]["memory"]["status"] == "sick") is sick
    assert ("n2" in v["sick"]) is sick
    if sick:
        assert f"{gib / 100:.2f} of the allocation's median 100.0 GiB" in v["sick"]["n2"][0]


def test_the_slowest_device_names_its_node():
    v = judge(records(gflops=(100, 100, 100, 70, 100, 100)))
    assert list(v["sick"]) == ["n2"]
    assert v["sick"]["n2"] == ["matmul: rank 3: 70 GFLOP/s, 0.70 of the allocation's median 100 GFLOP/s"]


def test_a_node_that_sends_slowly_is_named_and_left_out():
    """n3 (node 2) sends its gigabyte in 10 s to both partners: 0.1 GB/s against a median of
    1 GB/s over the six links."""
    slow = {**FAST, (2, 0, 1): 10.0, (2, 1, 2): 10.0}
    v = judge(records(seconds=slow))
    assert list(v["sick"]) == ["n3"] and list(v["exclude"]) == ["n3"]
    assert v["sick"]["n3"] == ["links: sends slowly: n3 -> n1 0.1 GB/s, n3 -> n2 0.1 GB/s (median 1 GB/s)"]
    assert v["slow_links"] == []  # explained by the node
    text = health_verdict.render(v)
    assert "n3    sick    links: sends slowly" in text


def test_a_slow_cable_is_a_link_and_costs_one_end():
    slow = {**FAST, (0, 1, 1): 10.0, (1, 0, 2): 10.0}
    v = judge(records(seconds=slow))
    assert v["sick"] == {} and not v["ok"]
    assert [(l["src"], l["dst"]) for l in v["slow_links"]] == [("n1", "n2"), ("n2", "n1")]
    assert list(v["exclude"]) == ["n1"]  # either end removes the link; one is enough
    assert "slow link n1 -> n2: 0.1 GB/s, median 1 GB/s (both nodes' other links are fine" \
        in health_verdict.render(v)


def test_a_missing_rank_is_its_nodes_fault_not_its_peers():
    recs = records()
    recs[4] = None
    for rank in (0, 2):
        recs[rank] = dict(recs[rank], status="failed", error="RuntimeError: Timed out in barrier",
                          links=[])
    v = judge(recs, ended_by="the health step passed health.timeout_s=300")
    assert list(v["sick"]) == ["n3"]
    assert v["sick"]["n3"][0] == "rank 4 left no record (the health step passed health.timeout_s=300)"
    assert v["nodes"][0]["notes"] == ["rank 0 failed after rank 4 left no record (not judged)"]


def test_versions_and_models_as_most_nodes_have_them():
    recs = records()
    recs[2]["checks"]["versions"]["versions"] = {"driver": "535.104", "cuda": "12.2", "nccl": "2.21.5"}
    recs[4]["checks"]["devices"]["models"] = ["NVIDIA A100-SXM4-80GB"] * 2
    v = judge(recs)
    assert v["sick"]["n2"] == ["versions: driver 535.104, cuda 12.2; the other nodes have "
                               "driver 550.54, cuda 12.4"]
    assert v["sick"]["n3"] == ["devices: GPU model NVIDIA A100-SXM4-80GB; the other nodes have "
                               "NVIDIA H100 80GB HBM3"]


def test_one_node_has_no_links_to_test_and_says_so():
    recs = {r: copy.deepcopy(records()[r]) for r in (0, 1)}
    v = health_verdict.judge(recs, ["n1"], 2, SETTINGS)
    assert v["ok"]
    assert v["nodes"][0]["checks"]["links"] == nodechecks.skipped("one node: no link between nodes")
    assert "links skipped on every node: one node: no link between nodes" in health_verdict.render(v)
