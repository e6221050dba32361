"""Which nodes preflight leaves out, from every attempt of the point's round together
(launchers/driver/preflight.py; docs/health.md, "Preflight: evidence across attempts").

One attempt's verdict (launchers/health/verdict.py) names a node sick where its own
figures say so, and that holds for the round. A slow link it cannot pin on either end is
evidence against both: with 2 nodes a slow node cannot be told from a slow link, and a
point of 2 nodes gets only 2. Each attempt's links are weighed with all the others':

- an end that did the same elsewhere at speed is not the cause: a node that sent fast on
  some link did not make this one slow by sending, one that received fast did not by
  receiving; the other end is;
- of the ends still suspect, the one suspect on slow links with the most partners is the
  cause of them all (a node slow both ways, met with one partner and then another);
- where nothing tells them apart, the sender, tentatively (either end gone removes the
  link, and the next allocation pairs the other end with someone new).

A node left out tentatively whom a later attempt clears is let back in: a 2-node point on
a 3-node partition with one node slow both ways trains on the healthy pair within 2
resubmissions, however Slurm pairs the nodes.

    left_out(attempts) -> {node: [why]}     attempts as preflight.json keeps them
"""


def _rate(link) -> str:
    return f"{link['src']} -> {link['dst']} {link['gbytes_s']:.3g} GB/s (attempt {link['attempt']})"


def _links(attempts: list, sick: set):
    """The slow links no sick node explains, and the fast ones, every attempt's."""
    below = {(a["attempt"], link["src"], link["dst"]): link["below"] for a in attempts
             for link in a.get("slow_links") or []}
    slow, fast = [], []
    for a in attempts:
        for src, dst, gbytes_s, is_slow in a.get("links") or []:
            link = {"src": src, "dst": dst, "gbytes_s": gbytes_s, "attempt": a["attempt"],
                    "below": below.get((a["attempt"], src, dst))}
            if not is_slow:
                fast.append(link)
            elif src not in sick and dst not in sick:
                slow.append(link)
    return slow, fast


def left_out(attempts: list) -> dict:
    """node -> why, every node the round's attempts leave out (the rule above)."""
    out: dict = {}
    for a in attempts:
        for node, why in (a.get("sick") or {}).items():
            out.setdefault(node, list(why))
    slow, fast = _links(attempts, set(out))
    sent_fast = {link["src"] for link in fast}
    received_fast = {link["dst"] for link in fast}
    # each slow link's suspects: an end that did the same at speed elsewhere is cleared
    suspects = []
    for link in slow:
        ends = [n for n, cleared in ((link["src"], sent_fast), (link["dst"], received_fast))
                if n not in cleared]
        suspects.append((link, ends or [link["src"]]))  # both cleared: the path; its sender
    while suspects:
        partners: dict = {}
        for link, ends in suspects:
            for n in ends:
                partners.setdefault(n, set()).add(link["dst"] if n == link["src"] else link["src"])
        first: dict = {}
        for link, ends in suspects:  # ties: the first suspect of the first link, its sender
            for n in ends:
                first.setdefault(n, len(first))
        node = max(partners, key=lambda n: (len(partners[n]), -first[n]))
        mine = [(link, ends) for link, ends in suspects if node in ends]
        out[node] = [_why(node, mine, partners[node], sent_fast, received_fast)]
        suspects = [(link, ends) for link, ends in suspects if node not in (link["src"], link["dst"])]
    return out


def _why(node, mine: list, partners: set, sent_fast: set, received_fast: set) -> str:
    links = ", ".join(_rate(link) for link, _ in mine)
    below = next((link["below"] for link, _ in mine if link["below"]), None)
    below = f" ({below})" if below else ""
    if len(partners) > 1:
        return f"links: slow with each of its partners {', '.join(sorted(partners))}: {links}{below}"
    link, ends = mine[0]
    other = link["dst"] if node == link["src"] else link["src"]
    if ends == [node] and other in sent_fast | received_fast:
        return (f"links: its link to {other} is slow: {links}{below}; {other} is fine with "
                "another partner")
    return (f"links: its link to {other} is slow: {links}{below}; either end may be the cause, "
            "this one is left out until another allocation tells")
