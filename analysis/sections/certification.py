"""The verdict of a certification (`python -m launch certify SUITE`, certify/; docs/certify.md):
the report of a certification leads with it, and the command prints it.

One row per item and point: what was measured, its baseline, their ratio (lower-is-better
metrics inverted: the ratio is always "how much of the baseline"), the threshold and the
verdict: PASS, FAIL, MEASURED (no baseline: measured and recorded, not judged) or NOT RUN
(the health gate failed first). Where the baseline is another implementation's figure, or
an item's point did not run well, a numbered note under the table says so. From
verdict.json as analysis.load read it (Results.certifications); this module reads no file.
"""
from analysis import tables

HEADERS = ["item", "nodes", "metric", "measured", "baseline", "ratio", "threshold", "verdict"]


def number(value) -> str:
    if tables.missing(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def row_of(item: dict, notes: list) -> list:
    """One item row of the table; its why and its baseline's note become numbered notes
    (each text once, however many rows say it)."""
    said = []
    for text in (item.get("why"), item.get("note")):
        if text:
            if text not in notes:
                notes.append(text)
            said.append(f"[{notes.index(text) + 1}]")
    mfu = item["metric"] == "mfu"   # a fraction of peak, shown as every MFU is (tables.percent)
    show = (lambda v: tables.percent(v, "-")) if mfu else number
    unit = f" {item['unit']}" if item.get("unit") and not mfu and not tables.missing(item.get("measured")) else ""
    return [item["item"], tables.allocation(item["nodes"], item["gpus_per_node"]),
            item["metric"] + (" (lower is better)" if item.get("lower_is_better") else ""),
            show(item.get("measured")) + unit, show(item.get("baseline")),
            "-" if tables.missing(item.get("ratio")) else f"{item['ratio']:.3f}",
            "-" if tables.missing(item.get("threshold")) else f"{item['threshold']:g}",
            " ".join([item["verdict"], *said])]


def health_line(verdict: dict) -> str:
    health = verdict.get("health") or {}
    if not health:
        return "health gate: not run"
    if health.get("ok"):
        return f"health gate: ok on {', '.join(health.get('hosts') or []) or 'the nodes'}"
    sick = "; ".join(f"{node} ({'; '.join(why)})" for node, why in sorted((health.get("sick") or {}).items()))
    links = "; ".join(f"slow link {link['src']} -> {link['dst']}" for link in health.get("slow_links") or [])
    return "health gate: FAIL: " + ("; ".join(filter(None, [sick, links, health.get("error")])) or "sick")


def render(verdict: dict) -> str:
    """The certification's section: a headline, the health gate, the table, the notes."""
    system = verdict.get("system") or {}
    base = verdict.get("baseline") or {}
    head = (f"## Certification {verdict.get('suite')}: {verdict.get('verdict')} "
            f"(exit {verdict.get('exit_code')})")
    facts = [f"system: {tables.allocation(system.get('nodes'), system.get('gpus_per_node'))} "
             f"(launcher {system.get('launcher')}, cluster {system.get('cluster')}); "
             f"baseline: {base.get('kind')}" + (f" {base['name']}" if base.get("name") else "")
             + (f"; threshold {verdict['threshold']:g} for every item" if verdict.get("threshold")
                else ""),
             health_line(verdict)]
    notes: list = []
    rows = [row_of(item, notes) for item in verdict.get("items") or ()]
    counts = ", ".join(f"{count} {said}" for said, count in (verdict.get("counts") or {}).items() if count)
    out = [head, "\n".join(facts)]
    if rows:
        out.append(tables.github(rows, HEADERS))
    if notes:
        out.append("\n".join(f"[{i}] {note}" for i, note in enumerate(notes, 1)))
    if verdict.get("why"):
        out.append(verdict["why"])
    out.append(f"{counts or 'no item'}; {verdict.get('folder') or ''}".rstrip("; "))
    return "\n\n".join(out)


def section(results) -> str:
    """Every certification under the report's path, each whole."""
    return "\n\n".join(render(verdict) for verdict in results.certifications)
