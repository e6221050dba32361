"""No import circle in analysis/: no module imports one that imports it back, directly or
through others (read from the source with `ast`, imports inside functions included), and
every module imports first in a fresh interpreter."""
import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANALYSIS = os.path.join(ROOT, "analysis")
MODULES = sorted(f[:-3] for f in os.listdir(ANALYSIS) if f.endswith(".py"))


def imports_of(module: str) -> set:
    """The analysis modules `module` imports (`analysis` itself is its __init__)."""
    with open(os.path.join(ANALYSIS, f"{module}.py")) as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "analysis":
                    out.add(parts[1] if len(parts) > 1 else "__init__")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != "analysis":
                continue
            if len(parts) > 1:
                out.add(parts[1])
            else:   # from analysis import x: the module x where there is one
                out |= {a.name if a.name in MODULES else "__init__" for a in node.names}
    out.discard(module)
    return out


def cycles(graph: dict) -> list:
    """Every module that reaches itself through the graph, with the path."""
    found = []
    for start in graph:
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    found.append(path + [start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return found


def test_the_check_finds_a_circle():
    assert cycles({"report": {"special"}, "special": {"report"}}) == [
        ["report", "special", "report"], ["special", "report", "special"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_analysis_module_imports_one_that_imports_it_back():
    graph = {m: imports_of(m) for m in MODULES}
    assert {"tables", "metrics"} <= set(MODULES)
    assert "report" not in graph["special"] and "special" in graph["report"]
    assert graph["tables"] == set()        # the table helpers: a leaf
    assert cycles(graph) == []


def test_every_module_imports_first_in_a_fresh_interpreter():
    procs = {m: subprocess.Popen([sys.executable, "-c", f"import analysis.{m}"], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for m in MODULES if m not in ("__init__", "__main__")}
    failed = {}
    for m, p in procs.items():
        _, err = p.communicate(timeout=120)
        if p.returncode:
            failed[m] = err.strip().splitlines()[-1:]
    assert failed == {}


@pytest.mark.parametrize("name", ["LABELS", "table", "ROW_KEY"])
def test_the_report_keeps_its_table_names(name):
    from analysis import report, tables

    assert getattr(report, name) is getattr(tables, name)


def test_special_keeps_metrics():
    from analysis import metrics, special

    assert special.metrics is metrics.metrics and special.MODEL_KEYS is metrics.MODEL_KEYS
