"""The health verdict (launchers/health/verdict.py) on rank records written by hand, against
figures worked out by hand: 3 nodes (2 where said) x 2 devices, health.min_fraction 0.8, the
site's figures (health.expect) where given."""
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


def records(gflops=(100, 100, 100, 100, 100, 100), seconds=FAST, nodes=3) -> dict:
    out = {}
    for rank in range(2 * nodes):
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
    assert v["sick"]["n3"] == ["links: sends slowly: n3 -> n1 0.1 GB/s, n3 -> n2 0.1 GB/s (below 0.8 x "
                               "the fabric's reference 1 GB/s)"]
    assert v["slow_links"] == []  # explained by the node
    text = health_verdict.render(v)
    assert "n3    sick    links: sends slowly" in text


def test_a_slow_cable_is_a_link_and_costs_one_end():
    slow = {**FAST, (0, 1, 1): 10.0, (1, 0, 2): 10.0}
    v = judge(records(seconds=slow))
    assert v["sick"] == {} and not v["ok"]
    assert [(l["src"], l["dst"]) for l in v["slow_links"]] == [("n1", "n2"), ("n2", "n1")]
    assert list(v["exclude"]) == ["n1"]  # either end removes the link; one is enough
    assert "slow link n1 -> n2: 0.1 GB/s, below 0.8 x the fabric's reference 1 GB/s (both nodes' " \
        "other links are fine" \
        in health_verdict.render(v)


def test_a_node_slow_both_ways_among_three_is_named():
    """The fault as a new user met it: n3 throttled to 0.04 GB/s both ways (25 s for its
    gigabyte), the other links at 1.5 GB/s. n3 is an end of 4 of the 6 links, so the median
    link is its own 0.04 GB/s and nothing is below 0.8 of it. Each node's best link is 1.5,
    1.5 and 0.04 GB/s, their median 1.5: against it n3 is slow both ways; set aside, the links
    left (n1 <-> n2) give the reference, 1.5 GB/s: n3's four links are 0.027 of it."""
    slow = {k: (25.0 if 2 in k[:2] else 1 / 1.5) for k in FAST}
    v = judge(records(seconds=slow))
    assert v["link_median_gbytes_s"] == pytest.approx(0.04)
    assert v["link_reference_gbytes_s"] == pytest.approx(1.5)
    assert list(v["sick"]) == ["n3"] and list(v["exclude"]) == ["n3"] and v["slow_links"] == []
    assert v["sick"]["n3"] == ["links: sends slowly and receives slowly: n1 -> n3 0.04 GB/s, "
                               "n2 -> n3 0.04 GB/s, n3 -> n1 0.04 GB/s, n3 -> n2 0.04 GB/s "
                               "(below 0.8 x the fabric's reference 1.5 GB/s)"]
    assert "the fabric's reference 1.5 GB/s (the median link, slow nodes set aside), median of all " \
        "0.04 GB/s" in health_verdict.render(v)


def expect(**figures) -> dict:
    return {**SETTINGS, "checks": list(nodechecks.CHECKS), "expect": figures}


def test_the_sites_link_rate_judges_two_nodes():
    """2 nodes, both links 0.5 GB/s: nothing faster to compare with, so the allocation's own
    figures pass them; below the site's 1 GB/s both are slow, and with 2 nodes the line says
    a slow node cannot be told from a slow link (preflight leaves out the sender of the
    first)."""
    recs = records(seconds={(0, 1, 1): 2.0, (1, 0, 1): 2.0}, nodes=2)
    hosts = HOSTS[:2]
    assert health_verdict.judge(recs, hosts, 2, SETTINGS)["ok"]
    assert health_verdict.judge(recs, hosts, 2, expect(link_gbytes_s=0.4))["ok"]
    v = health_verdict.judge(recs, hosts, 2, expect(link_gbytes_s=1.0))
    assert not v["ok"] and v["sick"] == {} and list(v["exclude"]) == ["n1"]
    assert [(l["src"], l["dst"], l["below"]) for l in v["slow_links"]] == [
        ("n1", "n2", "below health.expect.link_gbytes_s's 1 GB/s"),
        ("n2", "n1", "below health.expect.link_gbytes_s's 1 GB/s")]
    assert "slow link n2 -> n1: 0.5 GB/s, below health.expect.link_gbytes_s's 1 GB/s (with 2 nodes " \
        "a slow node cannot be told from a slow link)" in health_verdict.render(v)


def test_nodes_all_equally_slow_are_sick_by_the_sites_figures():
    """3 nodes, every link 0.5 GB/s and every device 100 GFLOP/s: the allocation's own
    medians and reference pass them all. The site expects 1 GB/s and 0.2 TFLOP/s: every node
    sends and receives slowly (no fast link shows any of them fine) and multiplies slowly."""
    recs = records(seconds={k: 2.0 for k in FAST})
    assert judge(recs)["ok"]
    v = judge(recs, expect(link_gbytes_s=1.0, matmul_tflops=0.2))
    assert sorted(v["sick"]) == HOSTS
    assert v["sick"]["n1"] == [
        "matmul: rank 0: 0.1 TFLOP/s, below the site's 0.2 TFLOP/s (health.expect.matmul_tflops)",
        "links: sends slowly and receives slowly: n1 -> n2 0.5 GB/s, n1 -> n3 0.5 GB/s, n2 -> n1 0.5 GB/s, "
        "n3 -> n1 0.5 GB/s (below health.expect.link_gbytes_s's 1 GB/s)"]


def test_gpus_and_infiniband_against_the_sites_figures():
    recs = records()
    recs[2]["checks"]["infiniband"]["value"] = 360.0  # 0.95 of the median (380): fine by it
    recs[4]["checks"]["infiniband"] = nodechecks.skipped("no InfiniBand device in /sys/class/infiniband")
    v = judge(recs, expect(gpus_per_node=2, ib_rate_gbits=400))
    assert list(v["sick"]) == ["n2", "n3"]
    assert v["sick"]["n2"] == ["infiniband: slowest port 360 Gb/s, below the site's 400 Gb/s "
                               "(health.expect.ib_rate_gbits)"]
    assert v["sick"]["n3"] == ["infiniband: no InfiniBand port rate (no InfiniBand device in "
                               "/sys/class/infiniband); the site expects 400 Gb/s (health.expect.ib_rate_gbits)"]
    v = judge(records(), expect(gpus_per_node=8))
    assert v["sick"]["n1"] == ["devices: 2 GPU(s); the site's nodes have 8 (health.expect.gpus_per_node)"]
    assert len(v["sick"]) == 3
    # a check the site did not ask for is left as it is
    assert judge(records(), {**expect(gpus_per_node=8), "checks": ["memory", "links"]})["ok"]


def test_a_node_with_no_gpu_where_the_site_expects_some_is_sick():
    recs = records()
    recs[0]["checks"]["devices"] = nodechecks.skipped("no GPU: device count and model not checked")
    v = judge(recs, expect(gpus_per_node=8))
    assert v["sick"]["n1"][0] == "devices: no GPU found; the site's nodes have 8 (health.expect.gpus_per_node)"


def test_a_link_that_cannot_move_its_bytes_within_the_cap_is_slow_with_the_rate_it_reached():
    """health.link_mb=64 within health.link_cap_s=2: below 64 MiB / 2 s = 0.0336 GB/s is slow,
    whatever the others do. 2 nodes: n2's probe said 5 MB/s, so its transfer was capped to
    10 MB, moved in 2 s: 0.005 GB/s; n1 -> n2 moved its 64 MiB in 0.05 s, 1.34 GB/s. The
    median of the two, 0.674 GB/s, is the reference (2 nodes: none set aside)."""
    mib = 64 * 2**20
    recs = records(nodes=2)
    recs[0]["links"] = [{"src": 1, "dst": 0, "stride": 1, "bytes": 10_000_000, "seconds": 2.0, "capped": True}]
    recs[2]["links"] = [{"src": 0, "dst": 1, "stride": 1, "bytes": mib, "seconds": 0.05, "capped": False}]
    settings = {**SETTINGS, "link_mb": 64, "link_cap_s": 2}
    v = health_verdict.judge(recs, HOSTS[:2], 2, settings)
    assert [(l["src"], l["dst"], l["capped"]) for l in v["slow_links"]] == [("n2", "n1", True)]
    assert v["slow_links"][0]["below"] == ("below 0.8 x the fabric's reference 0.674 GB/s and "
                                           "health.link_cap_s's 0.0336 GB/s")
    assert "1 capped (health.link_cap_s)" in health_verdict.render(v)
    # the same at 3 nodes: a node throttled both ways, each of its transfers capped
    recs = records()
    for rank in (0, 2, 4):
        for link in recs[rank]["links"]:
            if 2 in (link["src"], link["dst"]):
                link.update(bytes=10_000_000, seconds=2.0, capped=True)
            else:
                link.update(bytes=mib, seconds=0.05)
    v = judge(recs, settings)
    assert list(v["sick"]) == ["n3"]
    assert v["sick"]["n3"][0].startswith("links: sends slowly and receives slowly: n1 -> n3 0.005 GB/s "
                                         "(capped), n2 -> n3 0.005 GB/s (capped), ")


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


def test_the_link_tests_nccl_over_sockets_on_infiniband_is_flagged_and_expect_makes_it_sick():
    """contract/nccl_net.py's rule on the link test's ranks (tests/unit/data/nccl's lines):
    n3's NCCL fell back to sockets while its port is active. Flagged, not sick (leaving nodes
    out mends no setting); with health.expect.nccl_transport=IB, n3 is sick."""
    from pathlib import Path
    from contract import nccl_net
    data = Path(__file__).parent / "data" / "nccl"
    ports = [{"device": "mlx5_0", "port": "1", "state": "4: ACTIVE", "rate": "400 Gb/sec",
              "link_layer": "InfiniBand"}]
    recs = records()
    for rank, rec in recs.items():
        name = "socket-2.21.log" if rank >= 4 else "ib-2.21.log"
        rec.update(nccl=nccl_net.parse((data / name).read_text().splitlines()), infiniband_ports=ports)
    v = judge(recs)
    assert v["ok"] and v["sick"] == {}
    (flag,) = v["network_flags"]
    assert flag.startswith("NCCL ran over sockets on rank(s) 4, 5, on nodes that have InfiniBand (n3: ")
    assert f"network: {flag}" in health_verdict.render(v).splitlines()
    v = judge(recs, expect(nccl_transport="IB"))
    assert v["sick"] == {"n3": ["network: NCCL used Socket (eth0, eth1), NCCL 2.21.5; "
                                "health.expect.nccl_transport requires IB"]}
