"""Preflight on the Slurm test cluster of 3 nodes, as a user meets it (issue 46): a 2-node
point with preflight=true while one node's port is throttled to 40 Mbit/s both ways (tc on
both ends of its veth, tests/slurm_cluster). Slurm pairs the sick node2 with node1 first:
with 2 nodes the slow link cannot be pinned on either end, and the first guess is the
healthy node1; the second allocation pairs node2 with node3, and the evidence of both
(launchers/health/evidence.py) puts the slow links on node2 and lets node1 back in. The point
trains on node1 and node3 within health.retries (2), and says who was left out and why."""
import json
import time
from pathlib import Path

import pytest

from contract import paths
from tests.integration.test_health_slurm import sweep

pytestmark = [pytest.mark.slurm, pytest.mark.quiet]   # link speeds: one other test beside it at most


def test_a_two_node_point_trains_on_the_healthy_pair_of_three(slurm_cluster, tmp_path):
    with slurm_cluster.throttled("node2"):
        t0 = time.monotonic()
        wait, pdir, pre = sweep(tmp_path, "nodes=2", "gpus_per_node=1")
        took = time.monotonic() - t0
    tried = [a["nodes"] for a in pre["attempts"]]
    print(f"2-node point, node2 at 40 Mbit/s both ways: {len(tried)} health attempts "
          f"({', '.join('+'.join(n) for n in tried)}), {pre['resubmissions']} resubmission(s), "
          f"{took:.0f} s from submission to the recorded point")
    assert wait.returncode == 0, wait.stdout + wait.stderr
    assert tried == [["node1", "node2"], ["node2", "node3"], ["node1", "node3"]]
    assert pre["outcome"] == "ok" and pre["resubmissions"] == 2  # health.retries, the default
    assert list(pre["excluded"]) == ["node2"]
    why = pre["excluded"]["node2"][0]
    assert why.startswith("links: slow with each of its partners node1, node3: node1 -> node2 ")
    assert "below health.link_cap_s's 0.0336 GB/s" in why
    assert pre["readmitted"]["node1"].startswith("left out before (links: its link to node2 is slow")
    step = json.loads((pdir / paths.repeat_name(0) / paths.STEP_FILE).read_text())
    assert step["nodelist"] == "node[1,3]"
    run = json.loads((pdir / paths.repeat_name(0) / paths.RUN_FILE).read_text())
    assert run["status"] == "ok"
    line = next(l for l in wait.stdout.splitlines() if l.startswith(pdir.name))
    assert "COMPLETED" in line and "preflight left out node2 (links: slow with each of its partners" in line
    # the second allocation's driver said whom it let back in, in its log
    slurm = json.loads((pdir / paths.SLURM_FILE).read_text())
    logs = "".join(p.read_text() for p in Path(slurm["submitit_folder"]).glob("*_log.out"))
    assert "preflight: node1 let back in: left out before (links: its link to node2" in logs
