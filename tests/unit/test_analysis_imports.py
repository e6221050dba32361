"""analysis/'s modules import in a fixed order: report imports special, the table helpers
import no other analysis module (the tree-wide check for circles is
tests/unit/test_import_circles.py), and every module imports first in a fresh interpreter."""
import os
import subprocess
import sys

from tests import import_graph

ROOT = import_graph.ROOT
MODULES = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "analysis")) if f.endswith(".py"))


def test_report_imports_special_and_the_table_helpers_are_a_leaf():
    graph = import_graph.graph(tree=("analysis",))
    assert {"analysis.tables", "analysis.metrics"} <= set(graph)
    assert "analysis.report" not in graph["analysis.special"]
    assert "analysis.special" in graph["analysis.report"]
    assert graph["analysis.tables"] == set()


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
