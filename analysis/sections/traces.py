"""The report's "Traces" section: where profile=true left each trace, linked (a Markdown link,
which report.html renders as one), or why a point has none. The traces themselves are the
framework profilers' files (frameworks/common/profile.py); this module only lists what the
rank records say about them (analysis.load keeps it in Results.environments)."""
import os
from urllib.parse import quote

from contract import paths


def section(results) -> str:
    lines = []
    for rank in results.environments:
        info = rank.get("profile")
        if not info or info.get("status") == "untraced" or rank["rank"] != 0:
            continue
        where = f"- {rank['point']} repeat {rank['repeat']}, rank {rank['rank']}"
        if info.get("status") != "ok":
            lines.append(f"{where}: profile {info.get('status')}: {info.get('error')}")
            continue
        rdir = paths.repeat_dir(paths.point_dir(rank["sweep"], rank["point"]), rank["repeat"])
        path = os.path.abspath(os.path.join(rdir, str(info.get("path"))))
        shown = os.path.relpath(path, results.root) if results.root else path
        lines.append(f"{where}: {info.get('tool')}, {info.get('traced_steps')} steps after the "
                     f"timed window; {info.get('format')}: [{shown}]({quote(path)})")
    if not lines:
        return ""
    return "\n".join(["## Traces (profile=true: extra steps after the first repeat's timed "
                      "window, never timed)", *lines])
