"""What the report says first (docs/report.md): the sweep, its devices and frameworks, and
how its points ended: how many ended well, and each one that did not with its reason.

`summary(results)` gathers it as plain data; `text(gathered)` is the terminal report's opening,
and report.html sets the same data at the top of its first screen. A function of what
analysis.load read (this module reads no file).
"""
import os

from analysis import tables
from analysis.figures import method
from contract import paths, values

REASON_CHARS = 240   # a reason longer than this is cut here (the failures section has it whole)


def _names(column) -> list:
    return sorted({str(name) for name in column if isinstance(name, str) and name})


def _reason(point) -> str:
    """Why a point did not end well, in one line."""
    if point.status == "missing":
        why = "no repeat recorded"
    elif point.status == "incomplete":
        why = "a repeat has not finished (running, or its driver died)"
    else:
        why = point.error if isinstance(point.error, str) and point.error else "no error recorded"
    if point.status == "partial":
        why = f"{int(point.n_ok)} of {int(point.repeats)} repeats ok; {why}"
    why = " ".join(why.split())
    return why if len(why) <= REASON_CHARS else why[:REASON_CHARS - 3] + "..."


def _method(manifests) -> list:
    """Each distinct (warm-up, timed steps, repeats) of the points' settings, as words."""
    seen = set()
    for manifest in manifests.values():
        if all(values.is_integer(manifest.get(key)) for key in ("warmup_steps", "measure_steps", "repeats")):
            seen.add((manifest["warmup_steps"], manifest["measure_steps"], manifest["repeats"]))
    return [f"{warmup} warm-up + {timed} timed steps, {repeats} repeat{'s' if repeats != 1 else ''}"
            for warmup, timed, repeats in sorted(seen)]


def summary(results) -> dict:
    """sweeps, launchers, method, frameworks (name -> versions), devices, hosts, models,
    precisions, allocations ("NxG"), counts (status -> points), not_ok [(point, status, reason)],
    unreadable (bad point.json files: points left out of every table), figures (points
    with a throughput), flagged (of those, the ones with a flag) and marks (mark -> points)."""
    points, runs = results.points, results.runs
    versions: dict = {}
    if len(runs) and "framework_version" in runs:
        named = runs.dropna(subset=["framework_version"]).merge(
            points[["sweep", "point", "framework"]], on=["sweep", "point"])
        for fw, version in zip(named.framework, named.framework_version):
            versions.setdefault(str(fw), set()).add(str(version))
    frameworks = {fw: sorted(versions.get(fw, ())) for fw in _names(points.framework)}
    models = [f"{model} ({', '.join(_names(points[points.model == model].model_size)) or 'full'})"
              for model in _names(points.model)]
    allocations = tables.allocation_columns(points) if len(points) else []
    counts = points.status.value_counts().to_dict() if len(points) else {}
    not_ok = [(point.point, str(point.status), _reason(point)) for point in points.itertuples()
              if point.status != "ok"]
    marks = ([point_marks for point_marks in points.marks if isinstance(point_marks, str)]
             if "marks" in points else [])
    launchers = _names((manifest.get("launcher") or {}).get("name") for manifest in results.manifests.values()
                       if isinstance(manifest.get("launcher"), dict))
    return {"root": results.root,
            "sweeps": [os.path.basename(sweep.rstrip("/")) or sweep for sweep in _names(points.sweep)],
            "launchers": launchers, "method": _method(results.manifests),
            "frameworks": frameworks,
            "devices": _names(runs["device"]) if "device" in runs else [],
            "hosts": len({rank["host"] for rank in results.environments}),
            "models": models, "precisions": _names(points.precision),
            "allocations": allocations,
            "counts": {str(status): int(count) for status, count in counts.items()},
            "not_ok": not_ok,
            "unreadable": [bad_file for bad_file in results.corrupt if bad_file.get("repeat") is None
                           and bad_file.get("point") is not None],
            "figures": len(marks), "flagged": sum(bool(point_marks) for point_marks in marks),
            "marks": {mark: sum(mark in point_marks for point_marks in marks) for mark in method.MARKS
                      if any(mark in point_marks for point_marks in marks)}}


def ended(gathered: dict) -> str:
    """6 of 8 ended ok; 2 did not (1 OOM, 1 partial)."""
    total = sum(gathered["counts"].values())
    good = gathered["counts"].get("ok", 0)
    bad = {status: count for status, count in gathered["counts"].items() if status != "ok"}
    line = f"{good} of {total} ended ok"
    if bad:
        line += (f"; {total - good} did not ("
                 + ", ".join(f"{count} {tables.label(status)}" for status, count in sorted(bad.items())) + ")")
    if gathered["unreadable"]:
        line += f"; {len(gathered['unreadable'])} unreadable {paths.POINT_FILE} (left out)"
    return line


def flags(gathered: dict) -> str:
    """3 of 8 figures flagged: C 2, N 1 (or "" when none is)."""
    if not gathered["flagged"]:
        return ""
    return (f"{gathered['flagged']} of {gathered['figures']} figures flagged: "
            + ", ".join(f"{mark} {count}" for mark, count in gathered["marks"].items()))


def facts(gathered: dict) -> list:
    """(label, text) lines: the sweep, the method, frameworks, devices, what ran."""
    sweeps = gathered["sweeps"]
    out = [("sweep", sweeps[0] if len(sweeps) == 1 else f"{len(sweeps)} sweeps: {', '.join(sweeps)}")]
    if gathered["launchers"] or gathered["method"]:
        out.append(("method", "; ".join(gathered["method"] + [f"launcher {', '.join(gathered['launchers'])}"]
                                        if gathered["launchers"] else gathered["method"])))
    out.append(("frameworks", ", ".join(f"{fw} {'/'.join(versions) or '?'}"
                                        for fw, versions in gathered["frameworks"].items()) or "none"))
    hosts = f" ({gathered['hosts']} host{'s' if gathered['hosts'] != 1 else ''})" if gathered["hosts"] else ""
    out.append(("devices", (", ".join(gathered["devices"]) or "unknown") + hosts))
    ran = (", ".join(gathered["models"]), ", ".join(gathered["precisions"]), ", ".join(gathered["allocations"]))
    out.append(("ran", "; ".join(part for part in ran if part)))
    return out


def text(gathered: dict) -> str:
    """The terminal report's opening."""
    lines = [f"# Results: {gathered['root']}"] + [f"{label}: {said}" for label, said in facts(gathered)]
    lines.append(f"points: {ended(gathered)}")
    if gathered["flagged"]:
        lines.append(f"flags: {flags(gathered)} (the tables' legends say what each means)")
    lines += [f"- {point}: {tables.label(status)}: {why}" for point, status, why in gathered["not_ok"]]
    lines += [f"- {bad_file['file']}: {bad_file['reason']}" for bad_file in gathered["unreadable"]]
    return "\n".join(lines)
