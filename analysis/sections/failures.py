"""The report's last section: the repeats that failed, were cut short or are missing, each
with its status, its cause and its rank's last log lines, and every corrupt record file."""
from contract import paths


def section(results) -> str:
    bad = results.runs[results.runs.status != "ok"] if len(results.runs) else results.runs
    lines = []
    for r in bad.itertuples():
        lines.append(f"- {r.point} repeat {r.repeat}: {r.status}: {r.error}")
        tail = getattr(r, "log_tail", None)
        if isinstance(tail, dict) and tail.get("lines"):  # the rank's last words, as it left them
            lines.append(f"  rank {tail['rank']}'s log, last {len(tail['lines'])} lines:")
            lines += [f"    {line}" for line in tail["lines"]]
    missing = results.points[results.points.status == "missing"]
    lines += [f"- {r.point}: no repeat recorded" for r in missing.itertuples()]
    corrupt = getattr(results, "corrupt", [])
    if corrupt:  # every one, also those a repeat's error above names
        lines.append(f"Corrupt files ({len(corrupt)}): each costs only its repeat "
                     f"(a {paths.POINT_FILE} its point, a search ledger its search)")
        lines += [f"- {c['file']}: {c['reason']}" for c in corrupt]
    return "\n".join(["## Failed, cut short or missing", *lines]) if lines else ""
