"""The report's last section: the repeats that failed, were cut short or are missing, each
with its status, its cause and its rank's last log lines, and every corrupt record file."""
from contract import paths


def section(results) -> str:
    bad = results.runs[results.runs.status != "ok"] if len(results.runs) else results.runs
    lines = []
    for run in bad.itertuples():
        lines.append(f"- {run.point} repeat {run.repeat}: {run.status}: {run.error}")
        tail = getattr(run, "log_tail", None)
        if isinstance(tail, dict) and tail.get("lines"):  # the rank's last words, as it left them
            lines.append(f"  rank {tail['rank']}'s log, last {len(tail['lines'])} lines:")
            lines += [f"    {line}" for line in tail["lines"]]
    missing = results.points[results.points.status == "missing"]
    lines += [f"- {point.point}: no repeat recorded" for point in missing.itertuples()]
    corrupt = getattr(results, "corrupt", [])
    if corrupt:  # every one, also those a repeat's error above names
        lines.append(f"Corrupt files ({len(corrupt)}): each costs only its repeat "
                     f"(a {paths.POINT_FILE} its point, a search ledger its search)")
        lines += [f"- {bad_file['file']}: {bad_file['reason']}" for bad_file in corrupt]
    return "\n".join(["## Failed, cut short or missing", *lines]) if lines else ""
