"""The link test's schedule and what it says about slow links (healthchecks/linktest.py),
at the scale it is for: 1,000 nodes in two rounds, not half a million pairs; and its rule,
from measured rates to the slow nodes and links, at 3, 4, 8 and 1,000 nodes."""
import itertools
import random

import pytest

from healthchecks import linktest

N = 1000


def test_two_rounds_of_n_transfers_at_1000_nodes():
    rounds = linktest.schedule(N)
    assert [s for s, _ in rounds] == [1, 500]
    assert sum(len(pairs) for _, pairs in rounds) == 2 * N  # O(N), where every pair is ~N^2/2
    for stride, pairs in rounds:
        assert sorted(src for src, _ in pairs) == list(range(N))  # each node sends once
        assert sorted(dst for _, dst in pairs) == list(range(N))  # and receives once
        assert all(dst == (src + stride) % N and dst != src for src, dst in pairs)
    (_, first), (_, second) = rounds
    # the two rounds give every node different partners, to and from
    assert all(a[1] != b[1] for a, b in zip(first, second))
    assert len(set(first) | set(second)) == 2 * N


@pytest.mark.parametrize("nodes,expected", [
    (1, []), (2, [(1, [(0, 1), (1, 0)])]),
    (3, [(1, [(0, 1), (1, 2), (2, 0)]), (2, [(0, 2), (1, 0), (2, 1)])]),
    (4, [(1, [(0, 1), (1, 2), (2, 3), (3, 0)]), (2, [(0, 2), (1, 3), (2, 0), (3, 1)])]),
    (5, [(1, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]), (2, [(0, 2), (1, 3), (2, 4), (3, 0), (4, 1)])]),
])
def test_small_schedules_by_hand(nodes, expected):
    assert linktest.schedule(nodes) == expected


def out_links(node, nodes=N):
    return {(node, linktest.partners(node, nodes, s)[0]) for s in linktest.strides(nodes)}


def in_links(node, nodes=N):
    return {(linktest.partners(node, nodes, s)[1], node) for s in linktest.strides(nodes)}


def test_a_node_that_sends_slowly_is_named_at_1000_nodes():
    found = linktest.diagnose(N, out_links(617))
    assert found == {"nodes": {617: linktest.SLOW_NODE_SENDS}, "links": [], "ambiguous": False}


def test_a_node_that_receives_slowly_is_named_and_one_slow_both_ways_too():
    assert linktest.diagnose(N, in_links(3))["nodes"] == {3: linktest.SLOW_NODE_RECEIVES}
    both = linktest.diagnose(N, out_links(999) | in_links(999))
    assert both["nodes"] == {999: f"{linktest.SLOW_NODE_SENDS} and {linktest.SLOW_NODE_RECEIVES}"}
    assert both["links"] == []


def test_a_slow_link_is_a_link_not_a_node_at_1000_nodes():
    """One cable: node 10 -> 11 in the first ring. Both nodes' links in the second ring are
    fine, so neither is named; the link is."""
    found = linktest.diagnose(N, {(10, 11)})
    assert found == {"nodes": {}, "links": [(10, 11)], "ambiguous": False}
    # the same pair in the second ring, and a bad path both ways between 3 nodes' neighbours
    assert linktest.diagnose(N, {(10, 510)})["links"] == [(10, 510)]


def test_slow_nodes_and_slow_links_together_and_no_false_names():
    rng = random.Random(7)
    nodes = set(rng.sample(range(N), 5))
    slow = set().union(*(out_links(n) for n in nodes))
    rounds = dict(linktest.schedule(N))
    links = set()
    while len(links) < 5:  # five cables, away from the slow nodes and from each other
        src, dst = rng.choice(rounds[rng.choice([1, 500])])
        ends = {src, dst}
        if not ends & nodes and not any(ends & set(link) for link in links):
            links.add((src, dst))
    found = linktest.diagnose(N, slow | links)
    assert set(found["nodes"]) == nodes
    assert set(found["links"]) == links


def test_three_nodes_tell_a_node_from_a_link():
    """The test cluster's size: node 2 sending slowly (tc on its veth) slows 2 -> 0 in the
    first ring and 2 -> 1 in the second; a bad cable between 0 and 1 slows both of its
    directions, one in each ring, and names no node."""
    assert linktest.diagnose(3, {(2, 0), (2, 1)})["nodes"] == {2: linktest.SLOW_NODE_SENDS}
    cable = linktest.diagnose(3, {(0, 1), (1, 0)})
    assert cable["nodes"] == {} and cable["links"] == [(0, 1), (1, 0)]


def test_two_nodes_cannot_tell_and_say_so():
    found = linktest.diagnose(2, {(0, 1)})
    assert found == {"nodes": {}, "links": [(0, 1)], "ambiguous": True}
    assert linktest.diagnose(2, set()) == {"nodes": {}, "links": [], "ambiguous": False}
    assert linktest.schedule(1) == [] and linktest.diagnose(1, set())["nodes"] == {}


# ---- the rule, from rates: the fabric's reference, slow links, slow nodes ----------------
FAST, SLOW = 1.0, 0.02  # GB/s: a healthy link, and a node throttled to 160 Mbit/s
BOTH, SENDS, RECEIVES = "both", "sends", "receives"
SAID = {BOTH: f"{linktest.SLOW_NODE_SENDS} and {linktest.SLOW_NODE_RECEIVES}",
        SENDS: linktest.SLOW_NODE_SENDS, RECEIVES: linktest.SLOW_NODE_RECEIVES}


def rates(nodes, slow=None, rng=None):
    """(src, dst) -> GB/s of every link of the schedule; `slow`: node -> which way it is slow.
    With `rng`, healthy links vary 2x, as on the test cluster."""
    slow = slow or {}
    out = {}
    for _, pairs in linktest.schedule(nodes):
        for src, dst in pairs:
            bad = slow.get(src) in (BOTH, SENDS) or slow.get(dst) in (BOTH, RECEIVES)
            out[(src, dst)] = (SLOW if bad else FAST) * (rng.uniform(0.5, 1) if rng else 1)
    return out


def found(nodes, slow=None, fraction=0.8, floors=(), rng=None):
    out = linktest.judge(nodes, rates(nodes, slow, rng), fraction, floors)
    return {k: out[k] for k in ("nodes", "links", "ambiguous")}


def test_the_reference_is_the_median_link_with_the_slow_nodes_set_aside_by_hand():
    """3 nodes, node 2 slow both ways: it is an end of 4 of the 6 links, so the median link
    is its own (0.02), and nothing is below 0.8 of that. Each node's best link: node 0 has
    0 -> 1 at 1.0, node 1 has 1 -> 0 at 1.0, node 2 only 0.02: their median is 1.0. Against
    it node 2 is slow both ways; set aside, the links left are 0 -> 1 and 1 -> 0: 1.0."""
    r = rates(3, {2: BOTH})
    assert sorted(r.values()) == [SLOW] * 4 + [FAST] * 2
    assert linktest.best_link_median(r) == FAST
    assert linktest.reference(3, r, 0.8) == FAST
    assert set(linktest.judge(3, r, 0.8)["slow"]) == {(2, 0), (2, 1), (1, 2), (0, 2)}
    # an even count takes the higher middle value: half the nodes slow cannot drag it
    assert linktest.best_link_median({(0, 1): 0.5, (1, 2): 0.1, (2, 3): 0.4, (3, 0): 0.2}) == 0.5
    assert linktest.best_link_median({}) is None


def test_fast_flukes_do_not_lift_the_reference():
    """3 healthy nodes on a busy machine, links from 0.394 to 2.5 GB/s (as the test cluster
    measured once). The best links' median is 2.5, and 2 -> 1 is below 0.2 of it; but no node
    is slow against it (each has a fine link both ways), none is set aside, and the
    reference is the median link, (1.1 + 1.2) / 2 = 1.15: 2 -> 1 is 0.34 of it, not slow."""
    r = {(0, 1): 2.5, (1, 2): 1.2, (2, 0): 1.0, (0, 2): 2.39, (1, 0): 1.1, (2, 1): 0.394}
    assert linktest.best_link_median(r) == 2.5
    out = linktest.judge(3, r, 0.2)
    assert out["reference"] == pytest.approx(1.15) and out["slow"] == {} and out["nodes"] == {}


def test_a_floor_judges_whatever_the_others_do():
    """Every link 0.5 GB/s: nothing is below 0.8 of the reference (0.5), every link is below
    a floor of 1 GB/s; the reasons say which."""
    r = {link: 0.5 for link in rates(3)}
    assert linktest.judge(3, r, 0.8)["slow"] == {}
    floors = [(1.0, "health.expect.link_gbytes_s"), (0.0335, "health.link_cap_s")]
    assert linktest.judge(3, r, 0.8, floors)["slow"] == {link: ["health.expect.link_gbytes_s"] for link in r}
    r[(0, 1)] = 0.01
    assert linktest.judge(3, r, 0.8, floors)["slow"][(0, 1)] == [
        "reference", "health.expect.link_gbytes_s", "health.link_cap_s"]


@pytest.mark.parametrize("nodes", [3, 4, 8, 1000])
@pytest.mark.parametrize("way", [SENDS, RECEIVES, BOTH])
def test_one_slow_node_is_named_whatever_share_of_the_links_it_is_an_end_of(nodes, way):
    for node in ({0, 1, nodes - 1} if nodes > 8 else range(nodes)):
        assert found(nodes, {node: way}) == {"nodes": {node: SAID[way]}, "links": [], "ambiguous": False}


@pytest.mark.parametrize("nodes", [4, 8])
@pytest.mark.parametrize("way", [SENDS, RECEIVES, BOTH])
def test_two_slow_nodes_are_named_wherever_they_are(nodes, way):
    for pair in itertools.combinations(range(nodes), 2):
        assert found(nodes, dict.fromkeys(pair, way))["nodes"] == dict.fromkeys(pair, SAID[way]), pair


def test_two_slow_nodes_at_1000_and_the_node_that_sends_to_both_is_not_named():
    """Nodes 1 and 500 slow both ways: node 0 sends only to them (strides 1 and 500), so both
    of its outgoing links are slow; they are theirs, not its own (it receives well, and they
    are slow both ways)."""
    assert linktest.partners(0, N, 1)[0] == 1 and linktest.partners(0, N, 500)[0] == 500
    assert found(N, {1: BOTH, 500: BOTH}) == {"nodes": {1: SAID[BOTH], 500: SAID[BOTH]}, "links": [],
                                              "ambiguous": False}
    rng = random.Random(3)
    for _ in range(20):
        pair = rng.sample(range(N), 2)
        ways = {n: rng.choice([SENDS, RECEIVES, BOTH]) for n in pair}
        assert found(N, ways, 0.2, rng=rng)["nodes"] == {n: SAID[w] for n, w in ways.items()}


def test_three_nodes_two_slow_senders_are_named():
    """Nodes 1 and 2 send slowly: 1 -> 2, 1 -> 0, 2 -> 0, 2 -> 1 are slow. Node 0 receives
    only from them (both its incoming links slow), but sends well and they are firmly slow
    senders (each has a partner that receives well): node 0 is not named."""
    assert found(3, {1: SENDS, 2: SENDS}) == {"nodes": {1: SAID[SENDS], 2: SAID[SENDS]}, "links": [],
                                              "ambiguous": False}


def test_three_nodes_two_slow_both_ways_need_a_floor():
    """Every link then touches a slow node: all are equally slow, the reference with them, and
    no relative rule can tell. The site's figure can; with no fast link, nothing shows any
    node fine, and all three are named."""
    assert found(3, {1: BOTH, 2: BOTH}) == {"nodes": {}, "links": [], "ambiguous": False}
    named = found(3, {1: BOTH, 2: BOTH}, floors=[(0.5, "health.expect.link_gbytes_s")])["nodes"]
    assert named == dict.fromkeys(range(3), SAID[BOTH])


@pytest.mark.parametrize("nodes", [3, 4, 8, 1000])
def test_a_slow_cable_between_fast_nodes_is_a_link(nodes):
    r = rates(nodes)
    r[(1, 2)] = SLOW
    out = linktest.judge(nodes, r, 0.8)
    assert (out["nodes"], out["links"], out["slow"]) == ({}, [(1, 2)], {(1, 2): ["reference"]})


def test_noise_of_2x_on_healthy_links_stays_above_0_2():
    rng = random.Random(5)
    for nodes in (3, 4, 8, 1000):
        assert found(nodes, fraction=0.2, rng=rng) == {"nodes": {}, "links": [], "ambiguous": False}
        assert found(nodes, {nodes - 1: BOTH}, 0.2, rng=rng)["nodes"] == {nodes - 1: SAID[BOTH]}


def test_a_transfer_is_capped_to_what_its_probe_moves_in_the_cap():
    """64 MiB at 1 GB/s takes 0.067 s: uncapped. At 5 MB/s (40 Mbit/s) it would take 13.4 s;
    within 2 s the link moves 10 MB. Never below the probe's 256 KiB."""
    mib = 2**20
    assert linktest.transfer_bytes(1.0, 64 * mib, 2.0) == 64 * mib
    assert linktest.transfer_bytes(0.005, 64 * mib, 2.0) == 10_000_000
    assert linktest.transfer_bytes(1e-6, 64 * mib, 2.0) == linktest.PROBE_BYTES
    assert linktest.transfer_bytes(1e-6, 1000, 2.0) == 1000
    assert linktest.transfer_bytes(0.005, 64 * mib, float("inf")) == 64 * mib
