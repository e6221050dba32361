"""Cluster health on a real Slurm cluster with real faults (docs/health.md): a node whose port
is rate-limited with tc (sending, or both ways), and a node with fewer GPUs than a point asks
for, named by `launch health` and left out of preflight=true points; the site's own figures
(health.expect) judging 2 nodes.

The faults need a cluster of their own: a second test cluster (tests/slurm_cluster,
config.SECOND) runs beside the shared one for this module, 4 nodes, node1 with 1 fake GPU
and the others 2. Its nodes share this machine's 2 cores, so link speeds vary up to about 2x from
run to run (a healthy link was once measured at 0.385 of the median): the tests use
health.min_fraction=0.2, and a rate limit that makes a link some 25 to 50 times slower
(a real fabric gets the default, 0.8).
"""
import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from healthchecks import nodechecks
from contract import paths
from launchers.suite import ROOT
from tests.slurm_cluster import LocalSlurmCluster, config, skip_reason

pytestmark = [pytest.mark.slurm, pytest.mark.quiet]   # link speeds: one other test beside it at most
# The default link_mb (64 MiB): each transfer is capped to link_cap_s, so a throttled link
# costs seconds, and a fast one's 64 ms is timed more steadily than 4 MiB's 4 ms here.
FAST = ["health.min_fraction=0.2", "health.timeout_s=120"]
# A point's preflight here runs every check but the matrix multiply: with 4 to 8 ranks on
# 2 cores, a rank's best multiply can get a third of the others' (launch health's own tests
# run it, with fewer ranks than that).
PREFLIGHT_CHECKS = "health.checks=[" + ",".join(c for c in nodechecks.CHECKS if c != "matmul") + "]"
NO_GRES = "cluster.gpus=false"  # a site without gres: Slurm hands out nodes, whatever their GPUs


@pytest.fixture(scope="module")
def cluster():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    # munged wants every folder above its socket open to all: not pytest's tmp_path (0700)
    where = os.environ.get("DLBENCH_SLURM_HEALTH_DIR") or "/tmp/dlbench-slurm-health"
    c = LocalSlurmCluster(where, nodes=4, gpus_per_node=2, accounting=False,
                          instance=config.SECOND, devices={"node1": 1})
    c.up()
    try:
        with c.as_client():
            yield c
    finally:
        c.down()


@pytest.fixture
def throttle(cluster):
    """throttle(node, rate): the node's port rate-limited both ways (tc on both ends of its
    veth) for one test; lifted after it, whatever the test did."""
    with contextlib.ExitStack() as limits:
        yield lambda name, rate="40mbit": limits.enter_context(cluster.throttled(name, rate))


def launch(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "launch", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def health(tmp_path, *overrides):
    r = launch("health", "launcher=slurm", "cluster=localtest", f"output_root={tmp_path}", *FAST, *overrides)
    found = [os.path.join(tmp_path, d, paths.HEALTH_FILE) for d in os.listdir(tmp_path)
             if d.startswith(paths.HEALTH_RUN_PREFIX)]
    verdict = json.load(open(found[0])) if found and os.path.exists(found[0]) else None
    return r, verdict


def rows(stdout: str) -> dict:
    """node -> (status, detail) from the printed table."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split(None, 2)
        if parts and parts[0] in ("node1", "node2", "node3", "node4"):
            out[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return out


def test_a_node_whose_link_is_degraded_is_named(cluster, tmp_path):
    cluster.limit_rate("node3", "100mbit")
    try:
        r, verdict = health(tmp_path, "nodes=3", "gpus_per_node=1")
    finally:
        cluster.unlimit("node3")
    assert r.returncode == 1, r.stdout + r.stderr
    table = rows(r.stdout)
    assert table["node3"][0] == "sick" and table["node3"][1].startswith("links: sends slowly")   # and receives, at times: its ACKs queue behind its data
    assert table["node1"][0] == table["node2"][0] == "ok", r.stdout
    assert verdict["sick"].keys() == {"node3"} and verdict["slow_links"] == []
    slow = {(l["src"], l["dst"]) for l in verdict["links"] if l["slow"]}
    # what it sends, in each ring; what it receives may be slowed too (its acknowledgements
    # wait behind its data in the rate limiter), and is explained by the node as well
    assert {("node3", "node1"), ("node3", "node2")} <= slow
    assert all("node3" in link for link in slow)
    # on this CPU cluster the checks that cannot apply say why
    assert "ecc, rows, throttle, clocks, power, persistence skipped on every node: no GPU" in r.stdout


def test_a_node_slow_both_ways_among_three_is_named_within_a_minute(cluster, throttle, tmp_path):
    """The issue's fault: node1's port at 40 Mbit/s both ways (~0.005 GB/s against links of
    ~1 GB/s). It is an end of 4 of the 6 links: the median link is its own, and the
    allocation's median passed it; the fabric's reference (the median link with the slow
    nodes set aside) does not. 64 MiB at that rate would take 13 s a transfer; capped to
    health.link_cap_s, the check takes seconds, not minutes."""
    throttle("node1")
    t0 = time.monotonic()
    r, verdict = health(tmp_path, "nodes=3", "gpus_per_node=1")
    wall = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    assert verdict["sick"].keys() == {"node1"} and verdict["slow_links"] == [], r.stdout
    assert verdict["sick"]["node1"][0].startswith("links: sends slowly and receives slowly: "), r.stdout
    slow = {(l["src"], l["dst"]) for l in verdict["links"] if l["slow"]}
    assert slow == {("node1", "node2"), ("node2", "node1"), ("node1", "node3"), ("node3", "node1")}
    assert verdict["link_median_gbytes_s"] < 0.05 < 0.2 * verdict["link_reference_gbytes_s"]
    assert all(l["capped"] for l in verdict["links"] if l["slow"])  # 64 MiB would take 13 s each
    assert rows(r.stdout)["node2"][0] == rows(r.stdout)["node3"][0] == "ok"
    assert wall < 60, f"{wall:.0f} s\n{r.stdout}"


def test_preflight_keeps_a_two_node_point_off_a_node_slow_both_ways(cluster, throttle, tmp_path):
    """The 2-node point's first allocation is node1 and node2. Two nodes have nothing
    faster to compare with; the cap does: neither link moves 64 MiB within 2 s. A slow node
    cannot be told from a slow link there, so preflight leaves out the sender of the first,
    node1, and the point runs on node2 and node3."""
    throttle("node1")
    wait, pdir, pre = sweep(tmp_path, "nodes=2", "gpus_per_node=1")
    assert wait.returncode == 0, wait.stdout + wait.stderr
    assert list(pre["excluded"]) == ["node1"], pre
    assert "below health.link_cap_s's 0.0336 GB/s" in pre["excluded"]["node1"][0]
    assert [a["nodes"] for a in pre["attempts"]] == [["node1", "node2"], ["node2", "node3"]]
    step = json.loads((pdir / paths.repeat_name(0) / paths.STEP_FILE).read_text())
    assert step["nodelist"] == "node[2-3]"
    run = json.loads((pdir / paths.repeat_name(0) / paths.RUN_FILE).read_text())
    assert run["status"] == "ok"


def test_the_sites_figures_judge_two_nodes(cluster, tmp_path):
    """No fault: 2 nodes pass their own comparison. Against figures this cluster cannot reach
    (1,000 GB/s links, 1,000 TFLOP/s, 2 GPUs where node1 has 1) both nodes are sick and
    their link is slow; against figures it reaches, they pass."""
    r, verdict = health(tmp_path / "high", "nodes=2", "gpus_per_node=1", "health.expect.link_gbytes_s=1000",
                        "health.expect.matmul_tflops=1000", "health.expect.gpus_per_node=2")
    assert r.returncode == 1, r.stdout + r.stderr
    assert sorted(verdict["sick"]) == ["node1", "node2"]
    assert "devices: 1 GPU(s); the site's nodes have 2 (health.expect.gpus_per_node)" in verdict["sick"]["node1"]
    assert any(w.startswith("matmul: rank 1: ") and w.endswith("below the site's 1000 TFLOP/s "
                                                                "(health.expect.matmul_tflops)")
               for w in verdict["sick"]["node2"]), verdict["sick"]
    assert [(l["src"], l["dst"]) for l in verdict["slow_links"]] == [("node1", "node2"), ("node2", "node1")]
    assert all(l["below"] == "below health.expect.link_gbytes_s's 1000 GB/s" for l in verdict["slow_links"])
    r, verdict = health(tmp_path / "low", "nodes=2", "gpus_per_node=1", "health.expect.link_gbytes_s=0.01",
                        "health.expect.matmul_tflops=0.001", "health.expect.gpus_per_node=1")
    assert r.returncode == 0 and verdict["ok"], r.stdout + r.stderr


def test_a_node_with_fewer_gpus_than_requested_is_named(cluster, tmp_path):
    r, verdict = health(tmp_path, "nodes=3", "gpus_per_node=2", NO_GRES)
    assert r.returncode == 1, r.stdout + r.stderr
    assert list(verdict["sick"]) == ["node1"]
    assert verdict["sick"]["node1"] == ["devices: 1 GPU(s), 2 requested (Slurm's gres of the node "
                                        "(no CUDA runtime here))"]
    assert rows(r.stdout)["node2"][0] == "ok"


def sweep(tmp_path, *overrides):
    sdir = tmp_path / "sweep"
    r = launch("-m", "preset=smoke", "repeats=1", "warmup_steps=0", "measure_steps=2", "preflight=true",
               "launcher=slurm",
               "cluster=localtest", f"hydra.sweep.dir={sdir}", *FAST, PREFLIGHT_CHECKS, *overrides)
    assert r.returncode == 0, r.stdout + r.stderr
    wait = launch("status", str(sdir), "--wait", "--interval", "1", "--timeout", "200")
    pdir = next((sdir / paths.POINTS_DIR).iterdir())
    pre = json.loads((pdir / paths.PREFLIGHT_FILE).read_text())
    return wait, pdir, pre


def test_preflight_runs_a_two_node_point_on_two_healthy_nodes(cluster, tmp_path):
    """Slurm gives the first allocation node1 and node2; node1 has 1 GPU of the 2 asked for:
    the point is resubmitted without it and runs on two of the others."""
    wait, pdir, pre = sweep(tmp_path, "nodes=2", "gpus_per_node=2", NO_GRES)
    assert wait.returncode == 0, wait.stdout + wait.stderr
    line = next(l for l in wait.stdout.splitlines() if l.startswith(pdir.name))
    assert "COMPLETED" in line and "preflight left out node1 (devices: 1 GPU(s), 2 requested" in line
    first, second = pre["attempts"]
    assert first["nodes"] == ["node1", "node2"] and not first["ok"]
    assert "node1" not in second["nodes"] and second["ok"]
    assert pre["outcome"] == "ok" and pre["resubmissions"] == 1 and list(pre["excluded"]) == ["node1"]
    step = json.loads((pdir / paths.repeat_name(0) / paths.STEP_FILE).read_text())
    run = json.loads((pdir / paths.repeat_name(0) / paths.RUN_FILE).read_text())
    assert step["nodelist"] == f"node[{second['nodes'][0][-1]}-{second['nodes'][1][-1]}]"
    assert run["status"] == "ok"
    slurm = json.loads((pdir / paths.SLURM_FILE).read_text())
    assert slurm["exclude"] == ["node1"] and len(slurm["previous_jobs"]) == 1
    for a in pre["attempts"]:  # each attempt's health step is kept whole
        assert (pdir / a["dir"] / paths.HEALTH_FILE).exists()


def test_preflight_leaves_a_node_with_a_degraded_link_out(cluster, tmp_path):
    """node1 sends slowly: the 3-node point's first allocation (node1-3) names it, and the
    point runs on node2-4. (What it receives is slowed too, its acknowledgements waiting
    behind its data; with 2 nodes see test_preflight_keeps_a_two_node_point_off_...)"""
    cluster.limit_rate("node1", "100mbit")
    try:
        wait, pdir, pre = sweep(tmp_path, "nodes=3", "gpus_per_node=1")
    finally:
        cluster.unlimit("node1")
    assert wait.returncode == 0, wait.stdout + wait.stderr
    assert pre["excluded"]["node1"][0].startswith("links: sends slowly")   # and receives, at times: its ACKs queue behind its data
    assert [a["nodes"] for a in pre["attempts"]] == [["node1", "node2", "node3"], ["node2", "node3", "node4"]]
    step = json.loads((pdir / paths.repeat_name(0) / paths.STEP_FILE).read_text())
    assert step["nodelist"] == "node[2-4]"


def test_a_point_that_cannot_find_enough_healthy_nodes_is_unhealthy(cluster, tmp_path):
    wait, pdir, pre = sweep(tmp_path, "nodes=4", "gpus_per_node=2", NO_GRES)
    assert wait.returncode == 1
    line = next(l for l in wait.stdout.splitlines() if l.startswith(pdir.name))
    assert line.split()[1] == "UNHEALTHY"
    assert "needs 4 healthy node(s); partition debug has 3 once node1 (devices: 1 GPU(s), 2 " \
        "requested (Slurm's gres of the node (no CUDA runtime here))) is left out" in line
    assert pre["outcome"] == "unhealthy" and len(pre["attempts"]) == 1
    assert not (pdir / paths.repeat_name(0)).exists()  # no training run, failed or otherwise


def test_a_rank_that_dies_costs_its_node_seconds_not_the_timeout(cluster, tmp_path):
    """A site check that kills its rank on node2 (SIGKILL: no record): the others would wait
    for it in the links' rendezvous until health.timeout_s; the step is stopped seconds after
    srun reports the death, and node2 is named."""
    script = tmp_path / "die-on-node2.sh"
    script.write_text('#!/bin/sh\n[ "$(hostname)" = node2 ] && kill -9 $PPID\nexit 0\n')
    script.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    r, verdict = health(out, "nodes=3", "gpus_per_node=1", "health.timeout_s=200",
                        f"health.site_checks=[{script}]")
    assert r.returncode == 1, r.stdout + r.stderr
    assert list(verdict["sick"]) == ["node2"], verdict["sick"]
    assert verdict["sick"]["node2"] == ["rank 1 left no record: killed by SIGKILL (the kernel's "
                                        "out-of-memory killer is a likely cause) (stopped 10 s after "
                                        "rank 1 on node2: SIGKILL)"]
    assert [n.get("notes") for n in verdict["nodes"]][0] == [
        "rank 0 stopped waiting on a rank that ended first (not judged)"]
    (spec,) = out.glob(f"{paths.HEALTH_RUN_PREFIX}*/{paths.SPEC_FILE}")
    assert verdict["ended_unix"] - spec.stat().st_mtime < 60  # not health.timeout_s=200


def test_a_health_step_that_cannot_start_blames_no_node(cluster, tmp_path):
    """The site puts pyxis's option in its own srun arguments but Slurm has no pyxis (the
    suite's own runtime check never sees them): srun refuses the step and no rank writes a
    record. No node is left out for it; the point ends unhealthy, saying so."""
    wait, pdir, pre = sweep(tmp_path, "nodes=2", "gpus_per_node=1",
                            "cluster.srun_args=['--container-image=nowhere']")
    assert pre["outcome"] == "unhealthy" and pre["excluded"] == {} and pre["resubmissions"] == 0
    assert pre["error"].startswith("the health step left no record on any node (see health/attempt-00/")
    srun_log = os.path.join(paths.health_attempt_dir(pdir, 0), paths.SRUN_LOG)
    assert "unrecognized option '--container-image=nowhere'" in open(srun_log).read()
    assert not (pdir / paths.repeat_name(0)).exists()
