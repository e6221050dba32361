"""Each point of a certification judged: verdict.json's item rows (docs/certify.md).

A point's figures are the regression gate's (analysis/gate/reference.py `figures`: the
method's throughput, tokens/s, MFU, a collective's average bus bandwidth per op, a
checkpoint's GB/s), its baseline the entry the gate's one matcher finds
(certify/baselines.py `find`), its verdict certify/verdict.py's rule, and its provenance what
its rank records say it ran on (analysis/read/provenance.py). What a row keeps is what a
verdict needs and nothing of the configuration besides: no environment, no URL, no secret.
"""
import os
from typing import Any

from analysis.figures.metrics import MODEL_KEYS
from analysis.gate.reference import METRICS, entry_of, figures
from analysis.read import provenance
from analysis.read.record_file import point_row
from analysis.read.results import Results
from certify import baselines as base
from certify import verdict as rule
from certify.run import Planned
from certify.suite import Item, Suite
from contract.point import Point

Row = dict[str, Any]   # a figures row (analysis/read/record_file.py) or an item row: JSON


class Ambiguous(ValueError):
    """Several baseline entries match one point: the baseline cannot say which is its."""


def planned_row(point: Point, item: Item) -> Row:
    """A point's figures row as far as it is known before it runs (no device, no figure):
    what the matcher asks of an entry's configuration before anything runs."""
    row = point_row(point.as_dict(), point.sweep)
    model = dict(point.model)
    row.update({k: model.get(k) for k in MODEL_KEYS}, op=item.op, status="planned", device=None)
    return row


def matched_before(planned: list[Planned], baselines: base.Baselines) -> int:
    """How many points of the certification some baseline entry could be (device aside)."""
    return sum(bool(base.find(baselines.entries, planned_row(point, p.item), p.item, planned=True))
               for p in planned for point, _ in p.made)


def threshold_of(item: Item, suite: Suite, given: float | None) -> float:
    """certify.threshold where given (it replaces every item's), else the item's, else the
    suite's, else the default."""
    for t in (given, item.threshold, suite.threshold):
        if t is not None:
            return float(t)
    return rule.DEFAULT_THRESHOLD


def _why_unjudged(item: Item, baselines: base.Baselines) -> str | None:
    if baselines.kind == base.NONE:
        return None
    if baselines.kind == base.PUBLISHED and "none" in item.row:
        return f"no published baseline: {item.row['none']}"
    named = f"{baselines.kind} {baselines.name}".strip()
    return f"no baseline: no entry of {named} is this point's configuration"


def _row(p: Planned, point: Point, frow: Row | None, baselines: base.Baselines, threshold: float,
         ran_on: object) -> Row:
    item = p.item
    status = frow["status"] if frow else "missing"
    value = frow.get(METRICS[item.metric][0]) if frow else None
    found = base.find(baselines.entries, frow, item) if frow else []
    if len(found) > 1:
        raise Ambiguous(f"item {item.name}, point {point.name}: {len(found)} baseline entries "
                        f"match it ({'; '.join(e['source'] for e in found[:3])}): give one "
                        "certification, sweep or entry per configuration")
    e = found[0] if found else None
    lower = bool(e["lower_is_better"]) if e else METRICS[item.metric][2]
    ratio, verdict, why = rule.judge(value, e["value"] if e else None, lower, threshold, status)
    if verdict == rule.MEASURED and why is None:
        why = _why_unjudged(item, baselines)
    own = entry_of(frow, device=True, metric=item.metric) if frow else None
    return {"item": item.name, "point": point.name, "sweep": item.name, "nodes": point.nodes,
            "gpus_per_node": point.gpus_per_node, "metric": item.metric,
            "unit": METRICS[item.metric][1], "lower_is_better": lower, "op": item.op,
            "config": own["config"] if own else None, "status": status,
            "measured": rule.figure(value), "baseline": e["value"] if e else None,
            "ratio": ratio, "threshold": threshold, "verdict": verdict, "why": why,
            "baseline_from": e["source"] if e else None,
            "note": "; ".join(filter(None, [e.get("note") if e else None, item.note])) or None,
            "provenance": ran_on}


def rows(planned: list[Planned], baselines: base.Baselines, results: Results, suite: Suite,
         threshold: float | None = None) -> list[Row]:
    """verdict.json's item rows: one per point of every item, in the suite's order."""
    index: dict[tuple[str, str], list[Row]] = {}
    for r in figures(results):
        index.setdefault((os.path.normpath(str(r["sweep"])), r["point"]), []).append(r)
    ran_on = provenance.of_points(results)
    out: list[Row] = []
    for p in planned:
        label = os.path.normpath(p.folder)
        for point, _ in p.made:
            mine = index.get((label, point.name), [])
            frow = next((r for r in mine if p.item.op is None or r.get("op") == p.item.op),
                        mine[0] if mine else None)
            out.append(_row(p, point, frow, baselines, threshold_of(p.item, suite, threshold),
                            ran_on.get((label, point.name))))
    return out


def not_run(planned: list[Planned], suite: Suite, threshold: float | None = None) -> list[Row]:
    """The item rows of a certification whose health gate failed: every point NOT RUN."""
    return [{"item": p.item.name, "point": point.name, "sweep": p.item.name, "nodes": point.nodes,
             "gpus_per_node": point.gpus_per_node, "metric": p.item.metric,
             "unit": METRICS[p.item.metric][1], "lower_is_better": METRICS[p.item.metric][2],
             "op": p.item.op, "config": None, "status": None, "measured": None, "baseline": None,
             "ratio": None, "threshold": threshold_of(p.item, suite, threshold),
             "verdict": rule.NOT_RUN, "why": "the health gate failed: nothing was measured",
             "baseline_from": None, "note": None, "provenance": None}
            for p in planned for point, _ in p.made]
