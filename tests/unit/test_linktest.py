"""The link test's schedule and what it says about slow links (healthchecks/linktest.py),
at the scale it is for: 1,000 nodes in two rounds, not half a million pairs."""
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
