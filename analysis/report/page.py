"""report.html: the report a person opens first, one self-contained page (docs/report.md).

It renders report.contents.sections(results) in their order, through its template
(templates/report.html.j2, jinja2, autoescaped):
- the first screen: the summary (the sweep, devices and frameworks, how many points ended
  well and each that did not with its reason) and the main plots (throughput with
  whiskers, scaling against the ideal line, AMP over FP32, bus bandwidth);
- per model ONE table, a row per configuration and device count (tables.one_table), its
  flags as marks whose meaning shows on hover and in the legend under it;
- every other section as the terminal has it (Markdown, rendered by python-markdown),
  folded in <details> where the section says so: the detail tables (spread, step times,
  straggler, AMP; with the model's step-time-per-rank plot), the traces, the
  environment, the failures with their log tails.

This module decides what the page shows (plain values); the template says how. Plots are
embedded as base64 PNG and the style sheet (templates/report.css) is inline: nothing is
loaded from the network. Record text (errors, log lines) is escaped, so a '<' in a
traceback stays text: by the template, and before python-markdown for the sections.
"""
import base64
import contextlib
import datetime
import html
import os

import jinja2
import markdown
from markupsafe import Markup

from analysis import tables
from analysis.figures import method
from analysis.sections import summary
from contract import paths

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
FIRST_SCREEN_LAST = ("rank_steps_",)   # plots shown with their detail tables, not up front
# Up front, a row per model: its throughput, scaling and AMP plots side by side.
KINDS = ("throughput_", "scaling_", "amp_")
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                          undefined=jinja2.StrictUndefined)


def _embedded(plot, first: bool = False) -> dict:
    """One plot (analysis/plots/data.py's Plot: its name and PNG bytes) as the page embeds
    it; `first`: it starts a row (a model's first plot)."""
    return {"name": plot.name, "png": base64.b64encode(plot.png).decode("ascii"), "first": first}


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


def markdown_html(text: str) -> Markup:
    """A section's Markdown as HTML (line breaks kept; record text escaped first)."""
    return Markup(markdown.markdown(_blocks(html.escape(text, quote=False)),
                                    extensions=["tables", "sane_lists", "nl2br"]))


def folded(text: str, plot=None) -> dict:
    """A section in <details>: its first heading is the line that unfolds it."""
    first, _, rest = text.partition("\n")
    title = first.lstrip("#").strip() if first.startswith("#") else "details"
    return {"kind": "folded", "title": title, "plot": plot,
            "body": markdown_html(rest if first.startswith("#") else text)}


def _mark(m: str, limits: dict) -> dict:
    return {"mark": m, "meaning": method.MARKS[m].format(**limits) if m in method.MARKS else m}


# ---- the first screen ----------------------------------------------------------------------
def summary_of(s: dict, limits: dict) -> dict:
    """The summary box: its facts, the chips of how the points ended, and a line for each
    that did not end ok and each unreadable point file."""
    total, good = sum(s["counts"].values()), s["counts"].get("ok", 0)
    chips: list[dict] = [{"kind": "good", "text": f"{good} of {total} ended ok", "marks": ()}]
    chips += [{"kind": "part" if status == "partial" else "bad",
               "text": f"{n} {tables.label(status)}", "marks": ()}
              for status, n in sorted(s["counts"].items()) if status != "ok"]
    if s["unreadable"]:
        chips.append({"kind": "bad", "text": f"{len(s['unreadable'])} unreadable {paths.POINT_FILE}",
                      "marks": ()})
    if s["flagged"]:
        chips.append({"kind": "part", "text": f"{s['flagged']} of {s['figures']} figures flagged:",
                      "marks": [(_mark(k, limits), n) for k, n in s["marks"].items()]})
    items = [{"name": point, "status": tables.label(status), "part": status == "partial", "why": why}
             for point, status, why in s["not_ok"]]
    items += [{"name": c["file"], "status": None, "why": c["reason"]} for c in s["unreadable"]]
    return {"facts": list(summary.facts(s)), "chips": chips, "lines": items}


def _place(plot):
    """A plot's place up front: by model, then throughput, scaling, AMP; others after."""
    for i, kind in enumerate(KINDS):
        if plot.name.startswith(kind):
            return (0, plot.name[len(kind):], i)
    return (1, plot.name, 0)


def plots_of(plots, skipped) -> dict:
    """The plots up front (a row per model), and the lines saying which were skipped."""
    first = sorted((p for p in plots if not p.name.startswith(FIRST_SCREEN_LAST)), key=_place)
    models = [_place(p)[:2] for p in first]
    shown = [_embedded(p, i == 0 or models[i] != models[i - 1]) for i, p in enumerate(first)]
    notes = list(skipped) or ([] if shown else ["no plot for this sweep"])
    return {"plots": shown, "skipped": notes}


# ---- one table per model -------------------------------------------------------------------
def one_table_of(model: str, pts, limits: dict) -> dict:
    """A model's one table: a row per configuration and device count (tables.one_table),
    a point without a figure as its status and why across the row; the flags' legend."""
    rows = tables.one_table(pts)
    sweeps = len({r["sweep"] for r in rows}) > 1
    out = []
    for r in rows:
        labels = list(r["labels"]) + ([os.path.basename(r["sweep"])] if sweeps else [])
        figures = r["status"] not in tables.LABELS
        partial = (": " + r["error"] if r["error"] else "") if r["partial"] else None
        out.append({"labels": labels, "figures": figures, "status": tables.label(r["status"]),
                    "why": r["error"], "marks": [_mark(m, limits) for m in r["marks"]],
                    "cells": [(r["cells"][key], partial if key == "throughput" else None)
                              for key, _, _ in tables.ONE_TABLE]})
    marks = sorted({m for r in rows for m in r["marks"]}, key=list(method.MARKS).index)
    return {"model": model, "rows": out,
            "sizes": ", ".join(sorted(str(s) for s in pts.model_size.dropna().unique())),
            "labels": [*tables.ONE_TABLE_LABELS] + (["sweep"] if sweeps else []),
            "numbers": [h for _, h, _ in tables.ONE_TABLE],
            "flags": [_mark(m, limits) for m in marks], "partial": any(r["partial"] for r in rows)}


# ---- the page --------------------------------------------------------------------------------
def page(title: str, sections, plots=(), skipped=(), limits=None) -> str:
    """The whole page, from report.contents.sections(...) in order, analysis/plots/draw.py's
    plots and the lines saying which plots were skipped and why; `title`: the sweep's path."""
    limits = {"max_cv": method.MAX_CV, "max_drift": method.MAX_DRIFT, **(limits or {})}
    by_name = {p.name: p for p in plots}
    blocks = []
    for s in sections:
        if s.key == "summary":
            blocks.append({"kind": "summary", "summary": summary_of(s.data, limits),
                           "plots": plots_of(plots, skipped)})
        elif s.key.startswith("model:"):
            blocks.append({"kind": "model", "table": one_table_of(s.key.split(":", 1)[1], s.data, limits)})
        elif s.key.startswith("detail:"):
            mine = by_name.get(f"rank_steps_{s.key.split(':', 1)[1]}.png")
            blocks.append(folded(s.text, _embedded(mine) if mine else None))
        else:
            blocks.append(folded(s.text) if s.fold else {"kind": "markdown", "body": markdown_html(s.text)})
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return _ENV.get_template("report.html.j2").render(title=title, blocks=blocks, made=made)


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
