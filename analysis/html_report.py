"""report.html: the terminal report as one self-contained page, to open, mail or attach.

The page is the report's own Markdown (every table, trust flag and failure reason the
terminal shows) rendered by python-markdown, with the plots embedded as base64 PNG (made
in memory by analysis/plot.py) and a small inline style sheet: nothing is loaded from the network. Record text (errors, log
lines) is escaped before rendering, so a '<' in a traceback stays text.
"""
import base64
import datetime
import html
import os

import markdown

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 78em; }
table { border-collapse: collapse; margin: 0.6em 0 1.4em; font-size: 0.92em; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }
th { background: #eef2f7; } td:first-child, th:first-child { text-align: left; }
h1 { font-size: 1.5em; } h2 { border-bottom: 2px solid #4a6fa5; margin-top: 2em; }
h3 { font-size: 1.05em; margin-bottom: 0.2em; } code, pre { background: #f5f5f5; }
figure { display: inline-block; margin: 0.5em 1em 0.5em 0; } img { max-width: 46em; }
"""


def _embedded(plot) -> str:
    """One plot (analysis/plot.py's Plot: its name and PNG bytes) as an inline figure."""
    data = base64.b64encode(plot.png).decode("ascii")
    name = html.escape(plot.name)
    return (f'<figure><img alt="{name}" src="data:image/png;base64,{data}">'
            f"<figcaption>{name}</figcaption></figure>")


def _blocks(text: str) -> str:
    """The terminal text as Markdown blocks: a table ends where its rows do (the terminal
    puts a legend line right under a table; Markdown would read it as one more row)."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("|") and following.strip() and not following.startswith("|"):
            out.append("")
    return "\n".join(out)


def page(title: str, report_text: str, plots=(), note: str = "") -> str:
    """The whole page: the report's Markdown as HTML (line breaks kept), then the plots
    (analysis/plot.py's, embedded) and `note`'s lines (the plots skipped, and why)."""
    body = markdown.markdown(_blocks(html.escape(report_text, quote=False)),
                             extensions=["tables", "sane_lists", "nl2br"])
    figures = "".join(_embedded(p) for p in plots)
    notes = "".join(f"<p>{html.escape(line)}</p>" for line in note.splitlines())
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        body,
        "<h2>Plots</h2>" + (figures + notes or "<p>no plot for this sweep</p>"),
        f"<p><small>Written by dlbench's python -m analysis report, {made}.</small></p>",
        "</body></html>"])


def write(path: str, title: str, report_text: str, plots=(), note: str = "") -> str:
    """Write the page whole (a temporary file renamed into place); returns the path."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page(title, report_text, plots, note))
    os.replace(tmp, path)
    return path
