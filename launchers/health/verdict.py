"""The health verdict, written once: from one health step's rank records to each node's
checks, each link's bandwidth, and which nodes and links are sick (docs/health.md).

- A check its node's rank found sick is sick (healthchecks/nodechecks.py).
- A node one of whose ranks left no record is sick (how srun saw it end, where it did);
  so is one whose rank failed, unless a rank elsewhere left none (the others then fail
  waiting on it: not their fault), and unless the step's own stop ended it after a rank
  elsewhere died or failed.
- Devices and versions: the model, and each version, that most nodes have; a node with
  another is sick.
- A node whose value of a median check (clock, InfiniBand rate, free memory, /dev/shm,
  matrix multiply) is below health.min_fraction of the allocation's median is sick (one
  value per node: a sick node cannot drag that median). The matrix multiply: the node's
  slowest device against the median of every device.
- The site's own figures (health.expect, launchers/health/expected.py): below one is sick,
  whatever the other nodes do.
- Links, by healthchecks/linktest.py's rule: a link below health.min_fraction of the
  fabric's reference (the median link once the nodes slow against the median of each
  node's best link are set aside: a node that is an end of most links cannot drag it), or
  below a floor (health.expect's rate; what moves health.link_mb within
  health.link_cap_s), is slow; a node all of whose links one way are slow is named (sick),
  and a slow link no node explains is named on its own line.

`exclude` is what this step alone would leave out: every sick node, and for each slow link
that no node explains, the node that sends on it unless its other end is left out already
(either end gone removes the link); preflight weighs every attempt of its round together
(launchers/health/evidence.py). `render` prints a verdict: a row per node, a line per slow link
and, once each, why the checks that did not apply were skipped.
"""
import statistics
from collections import Counter

from contract import nccl_net, paths, statuses
from healthchecks import linktest, nodechecks
from launchers.health import expected


def below(value, median, fraction: float) -> bool:
    return value is not None and median is not None and value < fraction * median


def _fmt(value, unit) -> str:
    if unit == "bytes":
        return f"{value / 2**30:.1f} GiB"
    return f"{value:.3g} {unit}" if unit else f"{value:.3g}"


def _majority(values: dict):
    """The value most nodes have (the first seen among equals), or None."""
    counts = Counter(v for v in values.values() if v is not None)
    return counts.most_common(1)[0][0] if counts else None


def node_rows(records: dict, hosts: list, gpus_per_node: int) -> list:
    """One row per node: its host, its first rank's node checks, every rank's matmul."""
    rows = []
    for i, host in enumerate(hosts):
        ranks = range(i * gpus_per_node, (i + 1) * gpus_per_node)
        lead = records.get(ranks[0]) or {}
        checks = {k: dict(v) for k, v in (lead.get("checks") or {}).items() if k != "matmul"}
        rows.append({"node": lead.get("host") or host, "index": i, "checks": checks,
                     "ranks": {r: records.get(r) for r in ranks}, "sick": []})
    return rows


def _ranks(rows: list, ended_by: str | None = None, rank_ends=None, stopped=()) -> None:
    """Ranks without a record, or whose record failed. One the step's stop ended, after a
    rank elsewhere died or failed of itself, is not judged: it was waiting on that one."""
    rank_ends = rank_ends or {}
    missing = [(row["index"], r) for row in rows for r, rec in row["ranks"].items() if rec is None]
    own = [(i, r) for i, r in missing if r not in stopped]
    failed = any(rec is not None and rec.get("status") != "ok" and r not in stopped
                 for row in rows for r, rec in row["ranks"].items())
    for i, r in missing:
        if r in stopped and (own or failed):
            rows[i].setdefault("notes", []).append(f"rank {r} stopped waiting on a rank that "
                                                   "ended first (not judged)")
            continue
        how = f": {statuses.describe_end(rank_ends[r])}" if rank_ends.get(r) else ""
        rows[i]["sick"].append(f"rank {r} left no record{how}" + (f" ({ended_by})" if ended_by else ""))
    for row in rows:
        for r, rec in row["ranks"].items():
            if rec is not None and rec.get("status") != "ok":
                if own and row["index"] not in {i for i, _ in own}:
                    row.setdefault("notes", []).append(
                        f"rank {r} failed after rank {own[0][1]} left no record (not judged)")
                else:
                    row["sick"].append(f"rank {r} failed: {rec.get('error')}")


def _same_everywhere(rows: list) -> None:
    """Device models and versions: the majority's, on every node."""
    models = {row["node"]: tuple(sorted(set(row["checks"].get("devices", {}).get("models") or [])))
              or None for row in rows}
    common = _majority(models)
    for row in rows:
        mine = models[row["node"]]
        if common and mine and mine != common:
            row["checks"]["devices"].update(status="sick", reason=f"GPU model {', '.join(mine)}; "
                                            f"the other nodes have {', '.join(common)}")
    found = {row["node"]: row["checks"].get("versions", {}).get("versions") or {} for row in rows}
    keys = [k for k in ("driver", "cuda", "nccl") if any(k in v for v in found.values())]
    common = {k: _majority({n: v.get(k) for n, v in found.items()}) for k in keys}
    for row in rows:
        odd = [k for k in keys if common[k] and found[row["node"]].get(k) not in (None, common[k])]
        if odd:
            row["checks"]["versions"].update(status="sick", reason=(
                ", ".join(f"{k} {found[row['node']][k]}" for k in odd) + "; the other nodes have "
                + ", ".join(f"{k} {common[k]}" for k in odd)))


def _medians(rows: list, fraction: float) -> dict:
    medians = {}
    for name in nodechecks.MEDIAN_CHECKS:
        if name == "matmul":
            continue
        values = {row["node"]: row["checks"].get(name, {}).get("value") for row in rows}
        known = [v for v in values.values() if v is not None]
        if not known:
            continue
        medians[name] = median = statistics.median(known)
        for row in rows:
            check = row["checks"][name] if name in row["checks"] else None
            if check and below(check.get("value"), median, fraction):
                check.update(status="sick", reason=f"{check.get('reason') or name}: "
                             f"{check['value'] / median:.2f} of the allocation's median "
                             f"{_fmt(median, check.get('unit'))}")
    # matmul: every device; the node's slowest against the median of all
    per_rank = {r: (rec.get("checks") or {}).get("matmul") or {} for row in rows
                for r, rec in row["ranks"].items() if rec}
    known = [c["value"] for c in per_rank.values() if c.get("value") is not None]
    if known:
        medians["matmul"] = median = statistics.median(known)
    for row in rows:
        mine = [(r, per_rank[r]) for r in row["ranks"] if r in per_rank and per_rank[r]]
        if not mine:
            continue
        sick = [(r, c) for r, c in mine if c.get("status") == "sick"]
        slow = [(r, c) for r, c in mine if below(c.get("value"), medians.get("matmul"), fraction)]
        worst = min((c for _, c in mine if c.get("value") is not None), key=lambda c: c["value"],
                    default=None)
        if sick:
            row["checks"]["matmul"] = {"status": "sick", "reason": f"rank {sick[0][0]}: {sick[0][1]['reason']}"}
        elif slow:
            r, c = min(slow, key=lambda rc: rc[1]["value"])
            row["checks"]["matmul"] = {"status": "sick", "value": c["value"], "reason":
                                       f"rank {r}: {c['value']:.3g} GFLOP/s, {c['value'] / median:.2f} "
                                       f"of the allocation's median {median:.3g} GFLOP/s"}
        elif worst is not None:
            row["checks"]["matmul"] = {"status": "ok", "value": worst["value"], "reason": worst["reason"]}
        else:
            row["checks"]["matmul"] = dict(mine[0][1])
    return medians


def _why_slow(reasons: list, reference: float, fraction: float, floors: list) -> str:
    """What a slow link is below, in words."""
    said = {"reference": f"{fraction:g} x the fabric's reference {reference:.3g} GB/s"}
    said.update({why: f"{why}'s {floor:.3g} GB/s" if floor < 100 else f"{why}'s {floor:.0f} GB/s"
                 for floor, why in floors})
    return "below " + " and ".join(said[r] for r in reasons)


def _links(rows: list, settings: dict) -> dict:
    """Each link's rate, the slow ones and what they say (healthchecks/linktest.py's rule)."""
    fraction = float(settings["min_fraction"])
    measured = [dict(link) for row in rows for rec in row["ranks"].values() if rec
                for link in rec.get("links") or []]
    none = {"links": [], "slow": [], "ambiguous": False, "median": None, "reference": None}
    if len(rows) < 2:
        reason = "one node: no link between nodes"
        for row in rows:
            row["checks"]["links"] = nodechecks.skipped(reason)
        return none
    if not measured:
        for row in rows:
            row["checks"]["links"] = row["checks"].get("links") or nodechecks.skipped(
                "no link measured (health.checks, or the step did not get that far)")
        return none
    names = [row["node"] for row in rows]
    for link in measured:
        link["gbytes_s"] = link["bytes"] / link["seconds"] / 1e9 if link.get("seconds") else 0.0
    speed = {(link["src"], link["dst"]): link["gbytes_s"] for link in measured}
    capped = {(link["src"], link["dst"]) for link in measured if link.get("capped")}
    median = statistics.median(speed.values())
    floors = expected.link_floors(settings)
    found = linktest.judge(len(rows), speed, fraction, floors)
    slow, reference = found["slow"], found["reference"]

    def desc(src, dst):
        cap = " (capped)" if (src, dst) in capped else ""  # to what moves in health.link_cap_s
        return f"{names[src]} -> {names[dst]} {speed[(src, dst)]:.3g} GB/s{cap}"
    for row in rows:
        i = row["index"]
        why = found["nodes"].get(i)
        if why:
            mine = [(s, d) for (s, d) in sorted(slow) if i in (s, d)]
            reasons = [r for r in ["reference"] + [w for _, w in floors]
                       if any(r in slow[link] for link in mine)]
            row["checks"]["links"] = nodechecks.sick(
                f"{why}: {', '.join(desc(*link) for link in mine)} "
                f"({_why_slow(reasons, reference, fraction, floors)})")
        else:
            row["checks"]["links"] = nodechecks.ok(f"{sum(i in k for k in speed)} link(s) measured")
    lines = []
    for src, dst in found["links"]:
        why = ("with 2 nodes a slow node cannot be told from a slow link" if found["ambiguous"]
               else "both nodes' other links are fine: the path between them")
        lines.append({"src": names[src], "dst": names[dst], "gbytes_s": speed[(src, dst)],
                      "median": median, "reference": reference, "capped": (src, dst) in capped,
                      "below": _why_slow(slow[(src, dst)], reference, fraction, floors), "why": why})
    links = [{"src": names[link["src"]], "dst": names[link["dst"]], "stride": link["stride"], "bytes": link["bytes"],
              "capped": bool(link.get("capped")), "gbytes_s": link["gbytes_s"],
              "slow": (link["src"], link["dst"]) in slow} for link in measured]
    return {"links": sorted(links, key=lambda link: (link["stride"], link["src"])), "slow": lines,
            "ambiguous": found["ambiguous"], "median": median, "reference": reference}


def _network(rows: list, settings: dict) -> list:
    """NCCL's network on the link test's ranks (contract/nccl_net.py): the flags of sockets
    on nodes that have InfiniBand; a node whose network is not the one
    health.expect.nccl_transport requires is sick."""
    expect = (settings.get("expect") or {}).get("nccl_transport")
    ranks = [{"rank": r, "host": row["node"], "nccl": rec["nccl"], "ports": rec.get("infiniband_ports")}
             for row in rows for r, rec in row["ranks"].items() if rec and rec.get("nccl")]
    for row in rows:
        off = [r for r in ranks if expect and r["host"] == row["node"] and not nccl_net.meets(r["nccl"], expect)]
        if off:
            row["sick"].append(f"network: NCCL used {nccl_net.describe(off[0]['nccl'])}; "
                               f"health.expect.nccl_transport requires {expect}")
    return nccl_net.flags(ranks, len(rows))


def judge(records: dict, hosts: list, gpus_per_node: int, settings: dict, ended_by: str | None = None,
          rank_ends=None, stopped=()) -> dict:
    """The verdict of one health step (health.json's content but for where it ran)."""
    fraction = float(settings["min_fraction"])
    rows = node_rows(records, hosts, gpus_per_node)
    _ranks(rows, ended_by, rank_ends, set(stopped))
    if any(rec for row in rows for rec in row["ranks"].values()):
        _same_everywhere(rows)
        medians = _medians(rows, fraction)
    else:
        medians = {}
    expected.nodes(rows, settings)
    links = _links(rows, settings)
    network = _network(rows, settings)
    sick, exclude = {}, {}
    for row in rows:
        reasons = row["sick"] + [f"{name}: {c['reason']}" for name, c in row["checks"].items()
                                 if c.get("status") == "sick"]
        row["status"] = "sick" if reasons else "ok"
        if reasons:
            sick[row["node"]] = exclude[row["node"]] = reasons
    for line in links["slow"]:  # one end is enough: the link is gone with it
        if line["src"] not in exclude and line["dst"] not in exclude:
            exclude[line["src"]] = [f"links: its link to {line['dst']} is slow ({line['gbytes_s']:.3g} "
                                    f"GB/s, {line['below']})"]
    return {"schema": paths.HEALTH_SCHEMA, "version": paths.SCHEMA_VERSION,
            "ok": not sick and not links["slow"], "min_fraction": fraction,
            "gpus_per_node": gpus_per_node, "hosts": [row["node"] for row in rows],
            "recorded_ranks": sum(rec is not None for row in rows for rec in row["ranks"].values()),
            "nodes": [{k: row[k] for k in ("node", "index", "status", "checks")}
                      | ({"notes": row["notes"]} if row.get("notes") else {}) for row in rows],
            "links": links["links"], "slow_links": links["slow"], "link_median_gbytes_s": links["median"],
            "link_reference_gbytes_s": links["reference"], "expect": settings.get("expect") or {},
            "medians": medians, "sick": sick, "exclude": exclude, "network_flags": network}


def render(verdict: dict) -> str:
    """One row per node (its status and, when sick, why), one line per slow link, and the
    checks that did not apply, each with its reason once."""
    head = ("node", "status", "detail")
    rows = []
    for node in verdict["nodes"]:
        checks = node["checks"]
        sick = [f"{name}: {c['reason']}" for name, c in checks.items() if c.get("status") == "sick"]
        if node["status"] == "sick":
            detail = "; ".join(sick or verdict["sick"].get(node["node"], []))
        else:
            detail = "ok: " + ", ".join(n for n in nodechecks.CHECKS if checks.get(n, {}).get("status") == "ok")
        rows.append((node["node"], node["status"], detail))
    width = [max(len(str(r[i])) for r in [head] + rows) for i in range(2)]
    lines = [f"{r[0]:<{width[0]}}  {r[1]:<{width[1]}}  {r[2]}".rstrip() for r in [head] + rows]
    lines += [f"network: {flag}" for flag in verdict.get("network_flags") or ()]
    for link in verdict["slow_links"]:
        lines.append(f"slow link {link['src']} -> {link['dst']}: {link['gbytes_s']:.3g} GB/s, "
                     f"{link['below']} ({link['why']})")
    skipped: dict = {}
    for node in verdict["nodes"]:
        for name, c in node["checks"].items():
            if c.get("status") == "skipped":
                skipped.setdefault((c["reason"], name), set()).add(node["node"])
    by_reason: dict = {}
    for (reason, name), where in skipped.items():
        every = len(where) == len(verdict["nodes"])
        by_reason.setdefault((reason, every and "every node" or ", ".join(sorted(where))), []).append(name)
    for (reason, where), names in sorted(by_reason.items(),
                                         key=lambda kv: nodechecks.CHECKS.index(min(
                                             kv[1], key=nodechecks.CHECKS.index))):
        names = sorted(names, key=nodechecks.CHECKS.index)
        lines.append(f"{', '.join(names)} skipped on {where}: {reason}")
    if verdict.get("link_median_gbytes_s"):
        capped = sum(link.get("capped", False) for link in verdict["links"])
        lines.append(f"links: {len(verdict['links'])} measured in "
                     f"{len({link['stride'] for link in verdict['links']})} round(s), the fabric's reference "
                     f"{verdict['link_reference_gbytes_s']:.3g} GB/s (the median link, slow nodes set "
                     f"aside), median of all {verdict['link_median_gbytes_s']:.3g} GB/s"
                     + (f", {capped} capped (health.link_cap_s)" if capped else ""))
    return "\n".join(lines)
