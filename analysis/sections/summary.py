"""What the report says first (docs/report.md): the sweep, its devices and frameworks, and
how its points ended: how many ended well, and each one that did not with its reason.

`summary(results)` gathers it as plain data; `text(s)` is the terminal report's opening,
and report.html sets the same data at the top of its first screen. A function of what
analysis.load read (this module reads no file).
"""
import os

from analysis import tables
from analysis.figures import method
from contract import paths, values

REASON_CHARS = 240   # a reason longer than this is cut here (the failures section has it whole)


def _names(values) -> list:
    return sorted({str(v) for v in values if isinstance(v, str) and v})


def _reason(p) -> str:
    """Why a point did not end well, in one line."""
    if p.status == "missing":
        why = "no repeat recorded"
    elif p.status == "incomplete":
        why = "a repeat has not finished (running, or its driver died)"
    else:
        why = p.error if isinstance(p.error, str) and p.error else "no error recorded"
    if p.status == "partial":
        why = f"{int(p.n_ok)} of {int(p.repeats)} repeats ok; {why}"
    why = " ".join(why.split())
    return why if len(why) <= REASON_CHARS else why[:REASON_CHARS - 3] + "..."


def _method(manifests) -> list:
    """Each distinct (warm-up, timed steps, repeats) of the points' settings, as words."""
    seen = set()
    for point in manifests.values():
        if all(values.is_integer(point.get(k)) for k in ("warmup_steps", "measure_steps", "repeats")):
            seen.add((point["warmup_steps"], point["measure_steps"], point["repeats"]))
    return [f"{w} warm-up + {m} timed steps, {r} repeat{'s' if r != 1 else ''}"
            for w, m, r in sorted(seen)]


def summary(results) -> dict:
    """sweeps, launchers, method, frameworks (name -> versions), devices, hosts, models,
    precisions, allocations ("NxG"), counts (status -> points), not_ok [(point, status, reason)],
    unreadable (bad point.json files: points left out of every table), figures (points
    with a throughput), flagged (of those, the ones with a flag) and marks (mark -> points)."""
    p, runs = results.points, results.runs
    versions: dict = {}
    if len(runs) and "framework_version" in runs:
        named = runs.dropna(subset=["framework_version"]).merge(
            p[["sweep", "point", "framework"]], on=["sweep", "point"])
        for fw, v in zip(named.framework, named.framework_version):
            versions.setdefault(str(fw), set()).add(str(v))
    frameworks = {fw: sorted(versions.get(fw, ())) for fw in _names(p.framework)}
    models = [f"{m} ({', '.join(_names(p[p.model == m].model_size)) or 'full'})"
              for m in _names(p.model)]
    allocations = tables.allocation_columns(p) if len(p) else []
    counts = p.status.value_counts().to_dict() if len(p) else {}
    not_ok = [(r.point, str(r.status), _reason(r)) for r in p.itertuples() if r.status != "ok"]
    marks = [m for m in p.marks if isinstance(m, str)] if "marks" in p else []
    launchers = _names((m.get("launcher") or {}).get("name") for m in results.manifests.values()
                       if isinstance(m.get("launcher"), dict))
    return {"root": results.root,
            "sweeps": [os.path.basename(s.rstrip("/")) or s for s in _names(p.sweep)],
            "launchers": launchers, "method": _method(results.manifests),
            "frameworks": frameworks,
            "devices": _names(runs["device"]) if "device" in runs else [],
            "hosts": len({e["host"] for e in results.environments}),
            "models": models, "precisions": _names(p.precision),
            "allocations": allocations,
            "counts": {str(k): int(v) for k, v in counts.items()},
            "not_ok": not_ok,
            "unreadable": [c for c in results.corrupt if c.get("repeat") is None
                           and c.get("point") is not None],
            "figures": len(marks), "flagged": sum(bool(m) for m in marks),
            "marks": {k: sum(k in m for m in marks) for k in method.MARKS
                      if any(k in m for m in marks)}}


def ended(s: dict) -> str:
    """6 of 8 ended ok; 2 did not (1 OOM, 1 partial)."""
    total = sum(s["counts"].values())
    good = s["counts"].get("ok", 0)
    bad = {k: v for k, v in s["counts"].items() if k != "ok"}
    line = f"{good} of {total} ended ok"
    if bad:
        line += (f"; {total - good} did not ("
                 + ", ".join(f"{v} {tables.label(k)}" for k, v in sorted(bad.items())) + ")")
    if s["unreadable"]:
        line += f"; {len(s['unreadable'])} unreadable {paths.POINT_FILE} (left out)"
    return line


def flags(s: dict) -> str:
    """3 of 8 figures flagged: C 2, N 1 (or "" when none is)."""
    if not s["flagged"]:
        return ""
    return (f"{s['flagged']} of {s['figures']} figures flagged: "
            + ", ".join(f"{k} {n}" for k, n in s["marks"].items()))


def facts(s: dict) -> list:
    """(label, text) lines: the sweep, the method, frameworks, devices, what ran."""
    sweeps = s["sweeps"]
    out = [("sweep", sweeps[0] if len(sweeps) == 1 else f"{len(sweeps)} sweeps: {', '.join(sweeps)}")]
    if s["launchers"] or s["method"]:
        out.append(("method", "; ".join(s["method"] + [f"launcher {', '.join(s['launchers'])}"]
                                        if s["launchers"] else s["method"])))
    out.append(("frameworks", ", ".join(f"{fw} {'/'.join(v) or '?'}"
                                        for fw, v in s["frameworks"].items()) or "none"))
    hosts = f" ({s['hosts']} host{'s' if s['hosts'] != 1 else ''})" if s["hosts"] else ""
    out.append(("devices", (", ".join(s["devices"]) or "unknown") + hosts))
    out.append(("ran", "; ".join(x for x in (", ".join(s["models"]), ", ".join(s["precisions"]),
                                             ", ".join(s["allocations"])) if x)))
    return out


def text(s: dict) -> str:
    """The terminal report's opening."""
    lines = [f"# Results: {s['root']}"] + [f"{k}: {v}" for k, v in facts(s)]
    lines.append(f"points: {ended(s)}")
    if s["flagged"]:
        lines.append(f"flags: {flags(s)} (the tables' legends say what each means)")
    lines += [f"- {point}: {tables.label(status)}: {why}" for point, status, why in s["not_ok"]]
    lines += [f"- {c['file']}: {c['reason']}" for c in s["unreadable"]]
    return "\n".join(lines)
