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


def number(v) -> str:
    if tables.missing(v):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def row_of(r: dict, notes: list) -> list:
    """One item row of the table; its why and its baseline's note become numbered notes
    (each text once, however many rows say it)."""
    said = []
    for text in (r.get("why"), r.get("note")):
        if text:
            if text not in notes:
                notes.append(text)
            said.append(f"[{notes.index(text) + 1}]")
    mfu = r["metric"] == "mfu"   # a fraction of peak, shown as every MFU is (tables.percent)
    show = (lambda v: tables.percent(v, "-")) if mfu else number
    unit = f" {r['unit']}" if r.get("unit") and not mfu and not tables.missing(r.get("measured")) else ""
    return [r["item"], tables.allocation(r["nodes"], r["gpus_per_node"]),
            r["metric"] + (" (lower is better)" if r.get("lower_is_better") else ""),
            show(r.get("measured")) + unit, show(r.get("baseline")),
            "-" if tables.missing(r.get("ratio")) else f"{r['ratio']:.3f}",
            "-" if tables.missing(r.get("threshold")) else f"{r['threshold']:g}",
            " ".join([r["verdict"], *said])]


def health_line(verdict: dict) -> str:
    h = verdict.get("health") or {}
    if not h:
        return "health gate: not run"
    if h.get("ok"):
        return f"health gate: ok on {', '.join(h.get('hosts') or []) or 'the nodes'}"
    sick = "; ".join(f"{node} ({'; '.join(why)})" for node, why in sorted((h.get("sick") or {}).items()))
    links = "; ".join(f"slow link {link['src']} -> {link['dst']}" for link in h.get("slow_links") or [])
    return "health gate: FAIL: " + ("; ".join(filter(None, [sick, links, h.get("error")])) or "sick")


def render(verdict: dict) -> str:
    """The certification's section: a headline, the health gate, the table, the notes."""
    s = verdict.get("system") or {}
    base = verdict.get("baseline") or {}
    head = (f"## Certification {verdict.get('suite')}: {verdict.get('verdict')} "
            f"(exit {verdict.get('exit_code')})")
    facts = [f"system: {tables.allocation(s.get('nodes'), s.get('gpus_per_node'))} "
             f"(launcher {s.get('launcher')}, cluster {s.get('cluster')}); "
             f"baseline: {base.get('kind')}" + (f" {base['name']}" if base.get("name") else "")
             + (f"; threshold {verdict['threshold']:g} for every item" if verdict.get("threshold")
                else ""),
             health_line(verdict)]
    notes: list = []
    rows = [row_of(r, notes) for r in verdict.get("items") or ()]
    counts = ", ".join(f"{n} {v}" for v, n in (verdict.get("counts") or {}).items() if n)
    out = [head, "\n".join(facts)]
    if rows:
        out.append(tables.github(rows, HEADERS))
    if notes:
        out.append("\n".join(f"[{i}] {n}" for i, n in enumerate(notes, 1)))
    if verdict.get("why"):
        out.append(verdict["why"])
    out.append(f"{counts or 'no item'}; {verdict.get('folder') or ''}".rstrip("; "))
    return "\n\n".join(out)


def section(results) -> str:
    """Every certification under the report's path, each whole."""
    return "\n\n".join(render(v) for v in results.certifications)
