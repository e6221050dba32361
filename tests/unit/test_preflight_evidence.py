"""Preflight's evidence across attempts (launchers/health/evidence.py, launchers/driver/preflight.py):
which nodes a round of attempts leaves out, by hand; and a 2-node point on a 3-node
partition with one node's link slow, its allocations as Slurm hands them out (the first two
nodes not excluded), judged by the real verdict (launchers/health/verdict.py) on rank
records written by hand."""
import pytest

from healthchecks import nodechecks
from launchers import sweepdir
from launchers.driver import preflight
from launchers.health import evidence
from launchers.health import verdict as health_verdict
from launchers.plan import points
from tests.unit.test_points import cfg_of

SLOW, FAST = 0.005, 1.0  # GB/s: a port at 40 Mbit/s; a healthy link here
CAP = "below health.link_cap_s's 0.0336 GB/s"


def attempt(n: int, links: dict, sick=None) -> dict:
    """An attempt as preflight.json keeps it: links (src, dst) -> GB/s; slow below the cap."""
    return {"attempt": n, "sick": sick or {},
            "links": [[s, d, g, g < 0.0336] for (s, d), g in links.items()],
            "slow_links": [{"src": s, "dst": d, "gbytes_s": g, "below": CAP}
                           for (s, d), g in links.items() if g < 0.0336]}


def both_ways(a, b, rate):
    return {(a, b): rate, (b, a): rate}


def test_one_attempt_of_two_nodes_leaves_out_the_sender_on_a_guess():
    out = evidence.left_out([attempt(0, both_ways("node1", "node2", SLOW))])
    assert list(out) == ["node1"]
    assert out["node1"] == [f"links: its link to node2 is slow: node1 -> node2 0.005 GB/s (attempt 0), "
                            f"node2 -> node1 0.005 GB/s (attempt 0) ({CAP}); either end may be the "
                            "cause, this one is left out until another allocation tells"]


def test_a_node_slow_both_ways_met_twice_is_the_cause_and_the_guess_is_let_back_in():
    first = attempt(0, both_ways("node1", "node2", SLOW))
    second = attempt(1, both_ways("node2", "node3", SLOW))
    out = evidence.left_out([first, second])
    assert list(out) == ["node2"]
    assert out["node2"][0].startswith("links: slow with each of its partners node1, node3: "
                                      "node1 -> node2 0.005 GB/s (attempt 0), ")


@pytest.mark.parametrize("way", ["receives", "sends"])
def test_a_node_slow_one_way_is_found_by_the_links_that_are_fine(way):
    """Receiving slowly, node2 is guessed wrong first (node1 sent on the slow link) and found
    at the second attempt; sending slowly, at the first (it sent on the slow link)."""
    def links(a, b):  # b is node2
        return {(a, b): SLOW, (b, a): FAST} if way == "receives" else {(a, b): FAST, (b, a): SLOW}
    first = attempt(0, links("node1", "node2"))
    assert list(evidence.left_out([first])) == ["node1" if way == "receives" else "node2"]
    assert list(evidence.left_out([first, attempt(1, links("node3", "node2"))])) == ["node2"]


def test_an_end_fine_elsewhere_clears_itself_and_names_the_other():
    """node3 sends fast to node1 (attempt 0); then node3 -> node2 is slow: node2 receives slowly."""
    out = evidence.left_out([attempt(0, {("node3", "node1"): FAST, ("node1", "node3"): FAST}),
                             attempt(1, {("node3", "node2"): SLOW, ("node2", "node3"): FAST})])
    assert list(out) == ["node2"] and out["node2"][0].endswith("node3 is fine with another partner")


def test_a_slow_path_between_two_fine_nodes_leaves_out_its_sender():
    fine = {**both_ways("node1", "node3", FAST), **both_ways("node2", "node3", FAST)}
    out = evidence.left_out([attempt(0, {**fine, **both_ways("node1", "node2", SLOW)})])
    assert list(out) == ["node1"]


def test_a_node_sick_by_its_checks_stays_out_and_explains_its_links():
    sick = {"node1": ["devices: 1 GPU(s), 2 requested"]}
    out = evidence.left_out([attempt(0, both_ways("node1", "node2", SLOW), sick),
                             attempt(1, both_ways("node2", "node3", FAST))])
    assert out == sick


# ---- the round as preflight runs it ---------------------------------------------------------
PARTITION = ["node1", "node2", "node3"]
SETTINGS = {"min_fraction": 0.2, "link_mb": 64, "link_cap_s": 2,
            "checks": [c for c in nodechecks.CHECKS if c != "matmul"]}


def records(hosts: list, slow_node: str) -> dict:
    """One rank per node; every link of `slow_node` at 40 Mbit/s, the others at 1 GB/s."""
    seconds = {(0, 1): 1.0, (1, 0): 1.0}
    out = {}
    for rank, host in enumerate(hosts):
        links = [{"src": s, "dst": d, "stride": 1, "bytes": 10**9, "capped": True,
                  "seconds": seconds[(s, d)] / (SLOW if slow_node in (hosts[s], hosts[d]) else FAST)}
                 for (s, d) in seconds if d == rank]
        out[rank] = {"rank": rank, "host": host, "status": "ok", "error": None, "links": links,
                     "checks": {"memory": nodechecks.ok("free", value=100.0, unit="bytes")}}
    return out


class Partition:
    """A launcher object in an allocation of the point: each allocation the first 2 nodes of
    the partition that the point does not exclude (as Slurm handed them out here)."""

    def __init__(self, slow_node: str):
        self.slow_node, self.hosts, self.job = slow_node, PARTITION[:2], 1

    def health_step(self, point, hdir):
        return health_verdict.judge(records(self.hosts, self.slow_node), self.hosts, 1, SETTINGS)

    def where(self):
        return {"job_id": str(self.job), "nodes": list(self.hosts)}

    def resubmit_without(self, point, state):
        if state["resubmissions"] >= point.health.retries:
            raise preflight.Unhealthy(f"still sick after {point.health.retries} resubmission(s)")
        usable = [n for n in PARTITION if n not in state["excluded"]]
        if len(usable) < 2:
            raise preflight.Unhealthy(f"needs 2 healthy node(s); partition has {len(usable)}")
        self.hosts, self.job = usable[:2], self.job + 1
        return str(self.job)


@pytest.mark.parametrize("slow_node", ["node1", "node2", "node3"])
def test_a_two_node_point_trains_on_the_healthy_pair_within_two_resubmissions(tmp_path, slow_node):
    point = points.make_point(cfg_of("preset=smoke", "repeats=1", "preflight=true"), tmp_path, 0)
    sweepdir.write_point(point)
    assert point.health.retries == 2  # the default
    part, logged = Partition(slow_node), []
    while not preflight.passes(point, part, logged.append):
        state = preflight.read(point.dir)
        assert state["outcome"] == "resubmitted", state["error"]
    state = preflight.read(point.dir)
    healthy = [n for n in PARTITION if n != slow_node]
    assert part.hosts == healthy and state["outcome"] == "ok"
    met = slow_node in PARTITION[:2]  # Slurm's first allocation holds it (node3: never met)
    assert list(state["excluded"]) == ([slow_node] if met else []) and state["resubmissions"] <= 2
    tried = [a["nodes"] for a in state["attempts"]]
    if slow_node == "node2":  # the case: the first guess is the healthy node1
        assert tried == [["node1", "node2"], ["node2", "node3"], ["node1", "node3"]]
        assert list(state["readmitted"]) == ["node1"]
        assert "preflight: node1 let back in: left out before (links: its link to node2 is slow" in \
            "\n".join(logged)
        assert state["excluded"]["node2"][0].startswith("links: slow with each of its partners node1, node3")
