"""report.html: the report a person opens first, one self-contained page (docs/report.md).

It renders report.sections(results) in their order:
- the first screen: the summary (the sweep, devices and frameworks, how many points ended
  well and each that did not with its reason) and the main plots (throughput with
  whiskers, scaling against the ideal line, AMP over FP32, bus bandwidth);
- per model ONE table, a row per configuration and device count (tables.one_table), its
  flags as marks whose meaning shows on hover and in the legend under it;
- every other section as the terminal has it (Markdown, rendered by python-markdown),
  folded in <details> where the section says so: the detail tables (spread, step times,
  straggler, AMP; with the model's step-time-per-rank plot), the traces, the
  environment, the failures with their log tails.

Plots are embedded as base64 PNG and the style sheet is inline: nothing is loaded from the
network. Record text (errors, log lines) is escaped, so a '<' in a traceback stays text.
"""
import base64
import contextlib
import datetime
import html
import os

import markdown

from analysis import tables
from analysis.figures import method
from analysis.sections import summary
from contract import paths

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.2em 2em; color: #222; max-width: 90em; }
h1 { font-size: 1.4em; margin: 0 0 0.2em; }
h1 small { font-weight: normal; color: #666; font-size: 0.6em; }
h2 { font-size: 1.2em; border-bottom: 2px solid #4a6fa5; margin-top: 1.6em; }
h3 { font-size: 1.02em; margin-bottom: 0.2em; } code, pre { background: #f5f5f5; }
.summary { display: flex; flex-wrap: wrap; gap: 0.4em 2.5em; background: #f4f6fa;
           border: 1px solid #d5dbe5; border-radius: 6px; padding: 0.6em 1em; font-size: 0.92em; }
.summary dl { display: grid; grid-template-columns: max-content auto; gap: 0.15em 0.8em; margin: 0;
              align-content: start; }
.summary dt { color: #555; } .summary dd { margin: 0; }
.ended { flex: 1 1 28em; } .ended ul { margin: 0.3em 0 0; padding-left: 1.2em; }
.ended li { margin: 0.15em 0; }
.count { display: inline-block; border-radius: 1em; padding: 0.05em 0.7em; margin-right: 0.3em;
         font-weight: 600; }
.count.good { background: #d8f0dc; color: #1c5e2a; }
.count.bad { background: #f8d9d6; color: #8a1f12; }
.count.part { background: #fbecc7; color: #7a5300; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(24em, 1fr)); gap: 0.6em;
         margin: 0.8em 0; }
figure { margin: 0; } figure.model-first { grid-column-start: 1; }
figure img { width: 100%; height: auto; border: 1px solid #e3e3e3; }
figcaption { font-size: 0.75em; color: #666; }
.skipped { font-size: 0.8em; color: #666; margin: 0.2em 0; }
table { border-collapse: collapse; margin: 0.5em 0 0.6em; font-size: 0.9em; }
th, td { border: 1px solid #c9ced6; padding: 0.22em 0.55em; text-align: right; }
table.one td { white-space: nowrap; } th { background: #eef2f7; }
td.label, th.label { text-align: left; }
td:first-child, th:first-child { text-align: left; } .wide { overflow-x: auto; }
table.one tbody tr:nth-child(even) { background: #fafbfc; }
td.why { text-align: left; color: #8a1f12; max-width: 40em; }
.status { font-weight: 700; color: #b42318; } .status.part { color: #9a6700; }
.flag { display: inline-block; min-width: 1.1em; text-align: center; border-radius: 3px;
        background: #fde68a; color: #6b4e00; font-weight: 700; font-size: 0.85em;
        margin-left: 0.15em; cursor: help; text-decoration: none; }
.legend { font-size: 0.82em; color: #444; margin: 0 0 1em; }
details { border: 1px solid #d5dbe5; border-radius: 5px; padding: 0.3em 0.8em; margin: 0.6em 0; }
details > summary { cursor: pointer; font-weight: 600; }
details[open] > summary { margin-bottom: 0.4em; }
details img { max-width: 46em; }
"""
FIRST_SCREEN_LAST = ("rank_steps_",)   # plots shown with their detail tables, not up front
# Up front, a row per model: its throughput, scaling and AMP plots side by side.
KINDS = ("throughput_", "scaling_", "amp_")


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _figure(plot, first: bool = False) -> str:
    """One plot (analysis/plots/draw.py's Plot: its name and PNG bytes) as an inline figure;
    `first`: it starts a row (a model's first plot)."""
    data = base64.b64encode(plot.png).decode("ascii")
    row = ' class="model-first"' if first else ""
    return (f'<figure{row}><img alt="{_e(plot.name)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(plot.name)}</figcaption></figure>")


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


def markdown_html(text: str) -> str:
    """A section's Markdown as HTML (line breaks kept; record text escaped first)."""
    return markdown.markdown(_blocks(html.escape(text, quote=False)),
                             extensions=["tables", "sane_lists", "nl2br"])


def folded(text: str, extra: str = "") -> str:
    """A section in <details>: its first heading is the line that unfolds it."""
    first, _, rest = text.partition("\n")
    title = first.lstrip("#").strip() if first.startswith("#") else "details"
    body = markdown_html(rest if first.startswith("#") else text)
    return f"<details><summary>{_e(title)}</summary>{body}{extra}</details>"


# ---- the first screen ----------------------------------------------------------------------
def summary_html(s: dict, limits: dict) -> str:
    facts = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in summary.facts(s))
    total, good = sum(s["counts"].values()), s["counts"].get("ok", 0)
    chips = [f'<span class="count good">{good} of {total} ended ok</span>']
    for status, n in sorted(s["counts"].items()):
        if status != "ok":
            kind = "part" if status == "partial" else "bad"
            chips.append(f'<span class="count {kind}">{n} {_e(tables.label(status))}</span>')
    if s["unreadable"]:
        chips.append(f'<span class="count bad">{len(s["unreadable"])} unreadable {paths.POINT_FILE}</span>')
    items = [f'<li><b>{_e(point)}</b>: <span class="status{" part" if status == "partial" else ""}">'
             f"{_e(tables.label(status))}</span>: {_e(why)}</li>"
             for point, status, why in s["not_ok"]]
    items += [f"<li><b>{_e(c['file'])}</b>: {_e(c['reason'])}</li>" for c in s["unreadable"]]
    if s["flagged"]:
        chips.append(f'<span class="count part">{s["flagged"]} of {s["figures"]} figures flagged: '
                     + " ".join(f"{_mark(k, limits)} {n}" for k, n in s["marks"].items()) + "</span>")
    ended = "".join(chips) + (f"<ul>{''.join(items)}</ul>" if items else "")
    return (f'<section class="summary" id="summary"><dl>{facts}</dl>'
            f'<div class="ended">{ended}</div></section>')


def _place(plot):
    """A plot's place up front: by model, then throughput, scaling, AMP; others after."""
    for i, kind in enumerate(KINDS):
        if plot.name.startswith(kind):
            return (0, plot.name[len(kind):], i)
    return (1, plot.name, 0)


def plots_html(plots, skipped) -> str:
    first = sorted((p for p in plots if not p.name.startswith(FIRST_SCREEN_LAST)), key=_place)
    notes = "".join(f'<p class="skipped">{_e(line)}</p>' for line in skipped)
    if not first:
        return notes or '<p class="skipped">no plot for this sweep</p>'
    models = [_place(p)[:2] for p in first]
    figures = "".join(_figure(p, i == 0 or models[i] != models[i - 1]) for i, p in enumerate(first))
    return f'<section class="plots" id="plots">{figures}</section>{notes}'


# ---- one table per model -------------------------------------------------------------------
def _mark(m: str, limits: dict) -> str:
    meaning = method.MARKS[m].format(**limits) if m in method.MARKS else m
    return f'<abbr class="flag" title="{_e(meaning)}">{_e(m)}</abbr>'


def one_table_html(model: str, pts, limits: dict) -> str:
    rows = tables.one_table(pts)
    sweeps = len({r["sweep"] for r in rows}) > 1
    head = [*tables.ONE_TABLE_LABELS] + (["sweep"] if sweeps else [])
    numbers = [h for _, h, _ in tables.ONE_TABLE]
    out = ['<div class="wide"><table class="one"><thead><tr>'
           + "".join(f'<th class="label">{_e(h)}</th>' for h in head)
           + "".join(f"<th>{_e(h)}</th>" for h in numbers)
           + '<th class="label">flags</th></tr></thead><tbody>']
    for r in rows:
        cells = [f'<td class="label">{_e(x)}</td>' for x in r["labels"]]
        if sweeps:
            cells.append(f'<td class="label">{_e(os.path.basename(r["sweep"]))}</td>')
        if r["status"] in tables.LABELS:   # no figure: its status and why, across the row
            why = f": {_e(r['error'])}" if r["error"] else ""
            cells.append(f'<td class="why" colspan="{len(numbers) + 1}"><span class="status">'
                         f"{_e(tables.label(r['status']))}</span>{why}</td>")
        else:
            for key, _, _ in tables.ONE_TABLE:
                text = _e(r["cells"][key])
                if key == "throughput" and r["partial"]:
                    text += (f'<abbr class="flag" title="partial: some repeats did not finish ok'
                             f'{_e(": " + r["error"]) if r["error"] else ""}">*</abbr>')
                cells.append(f"<td>{text}</td>")
            cells.append('<td class="label">' + "".join(_mark(m, limits) for m in r["marks"])
                         + "</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    marks = "".join(sorted({m for r in rows for m in r["marks"]}, key=list(method.MARKS).index))
    legend = ["samples/s: median of the ok repeats; 95% interval: order statistics of the "
              "repeats (from 6; (lo..hi): min..max of fewer, no 95% interval exists); speedup "
              "over the 1-device point of the same configuration; efficiency: speedup / devices; "
              "MFU against the device's dense peak (docs/flops.md); memory: peak per rank."]
    if marks:
        legend.append("Flags: " + "; ".join(f"{_mark(m, limits)} {_e(method.MARKS[m].format(**limits))}"
                                            for m in marks))
    if any(r["partial"] for r in rows):
        legend.append('<abbr class="flag" title="partial">*</abbr> some repeats did not finish ok '
                      "(see the failures)")
    sizes = ", ".join(sorted(str(s) for s in pts.model_size.dropna().unique()))
    return (f'<h2 id="model-{_e(model)}">{_e(model)}{f" ({_e(sizes)})" if sizes else ""}</h2>'
            + "".join(out) + "".join(f'<p class="legend">{x}</p>' for x in legend))


# ---- the page --------------------------------------------------------------------------------
def page(title: str, sections, plots=(), skipped=(), limits=None) -> str:
    """The whole page, from report.sections(...) in order, analysis/plots/draw.py's plots and the
    lines saying which plots were skipped and why; `title`: the sweep's path."""
    limits = {"max_cv": method.MAX_CV, "max_drift": method.MAX_DRIFT, **(limits or {})}
    by_name = {p.name: p for p in plots}
    body = []
    for s in sections:
        if s.key == "summary":
            body += [summary_html(s.data, limits), plots_html(plots, skipped)]
        elif s.key.startswith("model:"):
            body.append(one_table_html(s.key.split(":", 1)[1], s.data, limits))
        elif s.key.startswith("detail:"):
            mine = by_name.get(f"rank_steps_{s.key.split(':', 1)[1]}.png")
            body.append(folded(s.text, _figure(mine) if mine else ""))
        else:
            body.append(folded(s.text) if s.fold else markdown_html(s.text))
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>dlbench: {_e(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>dlbench report <small>{_e(title)}</small></h1>",
        *body,
        f"<p><small>Written by dlbench's python -m analysis report, {made}.</small></p>",
        "</body></html>"])


def write(path: str, title: str, sections, plots=(), skipped=(), limits=None) -> str:
    """Write the page whole (a temporary file renamed into place); returns the path. An
    OSError names the page, never the temporary, which is removed."""
    text, tmp = page(title, sections, plots, skipped, limits), f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OSError(exc.errno, exc.strerror, path) from None
    return path
