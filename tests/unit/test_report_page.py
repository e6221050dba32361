"""report.html's structure (analysis/report/page.py), read back with the standard library's
HTML parser: the summary and the main plots first, then one table per model with its
columns and flags, then the detail tables and the failures folded. (A real browser renders
it in tests/integration/test_report_html.py.)"""
import json
import os
from html.parser import HTMLParser

import pytest

import analysis
from analysis import __main__ as cli
from analysis.report import contents as report
from analysis.sections import summary
from contract import paths, records
from tests.sweepfiles import write_point, write_repeat

ONE_TABLE_HEAD = ["framework", "precision", "batch/dev", "mode", "nodes x dev", "samples/s",
                  "95% interval", "speedup", "efficiency", "TFLOP/s per device", "MFU",
                  "J per sample", "W per device", "peak memory per rank (GiB)", "flags"]


class Page(HTMLParser):
    """What the tests read: the top-level blocks in order, each table's rows of cell texts,
    each <details>' summary line and text, each flag's mark and title."""

    def __init__(self, text):
        super().__init__()
        self.blocks, self.tables, self.details, self.flags = [], [], [], []
        self._depth, self._cell, self._details, self._abbr = 0, None, None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self._depth == 0 and tag in ("section", "h2", "details", "div", "p"):
            self.blocks.append((tag, a.get("id") or a.get("class") or ""))
        if tag == "details":
            self._depth += 1
            self._details = {"summary": "", "text": "", "in_summary": False}
        elif tag == "summary" and self._details is not None:
            self._details["in_summary"] = True
        elif tag == "table":
            self.tables.append({"class": a.get("class"), "rows": [], "folded": self._depth > 0})
        elif tag == "tr":
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "abbr":
            self._abbr = [a.get("title"), ""]

    def handle_endtag(self, tag):
        if tag == "details":
            self._depth -= 1
            self.details.append(self._details)
            self._details = None
        elif tag == "summary" and self._details is not None:
            self._details["in_summary"] = False
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1]["rows"][-1].append(self._cell.strip())
            self._cell = None
        elif tag == "abbr" and self._abbr:
            self.flags.append(tuple(reversed(self._abbr)))
            self._abbr = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._abbr is not None:
            self._abbr[1] += data
        if self._details is not None:
            self._details["summary" if self._details["in_summary"] else "text"] += data


@pytest.fixture
def sweep(tmp_path):
    """resnet50 fp32 and amp on 1x1 and 1x2, 2 repeats each (flag N: fewer than 3); bert_base
    fp32 1x1; a 1x4 resnet50 point that failed, with its log tail; a point never run."""
    s = str(tmp_path / "sweep")
    for num, (prec, gpn) in enumerate([("fp32", 1), ("fp32", 2), ("amp", 1), ("amp", 2)]):
        pt = write_point(s, f"00{num}-pytorch-resnet50-{prec}-1x{gpn}-bs8", precision=prec,
                         gpus_per_node=gpn, repeats=2)
        for r in range(2):
            write_repeat(pt, r, [0.5 if prec == "amp" else 1.0] * gpn)   # 80 or 160 per rank
    bert = write_point(s, "004-pytorch-bert_base-fp32-1x1-bs8", model="bert_base", repeats=2)
    for r in range(2):
        write_repeat(bert, r, [2.0])                                      # 40 samples/s
    bad = write_point(s, "005-pytorch-resnet50-fp32-1x4-bs8", gpus_per_node=4, repeats=1)
    rdir = write_repeat(bad, 0, [1.0] * 4, status="failed", error="RuntimeError: tensor <lost>")
    with open(os.path.join(rdir, paths.RUN_FILE)) as f:
        run = json.load(f)
    run["log_tail"] = {"rank": 2, "lines": ["step 3", "RuntimeError: tensor <lost>"]}
    records.write_json_atomic(os.path.join(rdir, paths.RUN_FILE), run)
    write_point(s, "006-pytorch-resnet50-fp32-2x4-bs8", nodes=2, gpus_per_node=4, repeats=1)
    return s


@pytest.fixture
def page(sweep, tmp_path, capsys):
    out = tmp_path / "rep"
    assert cli.main(["report", sweep, "--out", str(out)]) == 0
    capsys.readouterr()
    text = (out / "report.html").read_text()
    return text, Page(text)


def test_the_first_screen_is_the_summary_then_the_plots(page):
    text, p = page
    order = [b for b in p.blocks if b[0] in ("section", "h2", "details")]
    assert order[:2] == [("section", "summary"), ("section", "plots")]
    assert order[2:4] == [("h2", "model-bert_base"), ("h2", "model-resnet50")]
    assert all(kind == "details" for kind, _ in order[4:])
    head = text.split('id="plots"')[0]
    summary_ = head.split('id="summary"')[1]
    for fact in ("sweep", "frameworks", "pytorch 9.9", "devices", "cpu (1 host)",
                 "bert_base (tiny), resnet50 (tiny)", "1x1, 1x2, 1x4, 2x4",
                 "5 of 7 ended ok", "1 FAILED", "1 missing",
                 "005-pytorch-resnet50-fp32-1x4-bs8", "RuntimeError: tensor &lt;lost&gt;",
                 "006-pytorch-resnet50-fp32-2x4-bs8", "no repeat recorded"):
        assert fact in summary_, fact
    plots = text.split('id="plots"')[1].split("<h2")[0]
    # by model: throughput, scaling, AMP; the step times per rank wait in the details
    names = [x.split('"')[0] for x in plots.split('<img alt="')[1:]]
    assert names == ["throughput_bert_base.png", "throughput_resnet50.png", "scaling_resnet50.png",
                     "amp_resnet50.png"]
    assert "plot skipped: scaling" not in plots and "plot skipped: bus bandwidth" in plots


def test_one_table_per_model_a_row_per_configuration_and_device_count(page):
    text, p = page
    one = [t for t in p.tables if t["class"] == "one"]
    assert len(one) == 2 and not any(t["folded"] for t in one)
    bert, resnet = one
    assert bert["rows"][0] == ONE_TABLE_HEAD and resnet["rows"][0] == ONE_TABLE_HEAD
    assert bert["rows"][1][:6] == ["pytorch", "fp32", "8", "compile off", "1x1", "40.0"]
    rows = {(r[1], r[4]): r for r in resnet["rows"][1:]}
    assert list(rows) == [("amp", "1x1"), ("amp", "1x2"), ("fp32", "1x1"), ("fp32", "1x2"),
                          ("fp32", "1x4"), ("fp32", "2x4")]
    # 2 repeats: no 95% interval, min..max in parentheses; speedup 2.00, efficiency 100%
    assert rows[("fp32", "1x2")][5:9] == ["160.0", "(160.0..160.0)", "2.00", "100%"]
    assert rows[("amp", "1x1")][5:9] == ["160.0", "(160.0..160.0)", "1.00", "100%"]
    assert rows[("fp32", "1x2")][-1] == "NB"   # its own N, and B: over a flagged baseline
    # a point without a figure says so across the row, with its reason
    assert rows[("fp32", "1x4")][5] == "FAILED: rank 0: RuntimeError: tensor <lost>"
    assert rows[("fp32", "2x4")][5] == "missing"
    assert ("N", "fewer than 3 ok repeats") in p.flags
    assert ("B", "speedup or efficiency over a flagged 1-device baseline") in p.flags


def test_detail_tables_and_failures_are_folded(page):
    text, p = page
    folds = {d["summary"].strip(): d["text"] for d in p.details}
    resnet = folds["resnet50: details (spread, step times, straggler, AMP over FP32)"]
    for title in ("Spread across repeats", "Step time per rank", "Straggler ratio",
                  "AMP over FP32"):
        assert title in resnet, title
    assert any(t["folded"] and t["rows"][0][:4] == ["framework", "precision", "batch/dev", "mode"]
               for t in p.tables)
    assert 'alt="rank_steps_resnet50.png"' in text.split("resnet50: details")[1].split("</details>")[0]
    failures = folds["Failed, cut short or missing"]
    assert "005-pytorch-resnet50-fp32-1x4-bs8 repeat 0: failed: rank 0: RuntimeError: tensor <lost>" \
        in failures
    assert "rank 2's log, last 2 lines" in failures and "step 3" in failures
    # read back as text above, and never markup in the page: the template escapes every value,
    # the sections' Markdown is escaped before it is rendered
    assert "<lost>" not in text and text.count("tensor &lt;lost&gt;") >= 4
    assert "Environment" in folds
    assert "http://" not in text and "https://" not in text   # nothing from the network


def test_the_terminal_report_follows_the_same_order(sweep):
    parts = report.sections(analysis.load(sweep))
    assert [s.key for s in parts] == ["summary", "model:bert_base", "model:resnet50",
                                      "detail:bert_base", "detail:resnet50", "environment",
                                      "failures"]
    assert [s.key for s in parts if s.fold] == ["detail:bert_base", "detail:resnet50",
                                                "environment", "failures"]
    text = report.text(parts)
    assert text.startswith("# Results: ") and "points: 5 of 7 ended ok; 2 did not (1 FAILED, " \
                                                  "1 missing)" in text


def test_the_summary_counts_the_flags(sweep):
    s = summary.summary(analysis.load(sweep))
    assert (s["figures"], s["flagged"], s["marks"]) == (5, 5, {"N": 5})
    assert summary.flags(s) == "5 of 5 figures flagged: N 5"
