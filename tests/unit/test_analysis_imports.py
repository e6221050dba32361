"""analysis/'s packages import downward only, in the layers tests/import_graph.py's
ANALYSIS_LAYERS names once (the tree-wide check for circles is
tests/unit/test_import_circles.py); the plots never import a report section; the second
process is neutral; analysis/ has at most 15 packages and modules at its top; and every module
imports first in a fresh interpreter."""
import os
import subprocess
import sys

from tests import import_graph

ROOT = import_graph.ROOT
MODULES = sorted(import_graph.modules(tree=("analysis",)))


def test_an_upward_import_is_found():
    layers = (("p.low",), ("p.mid_a", "p.mid_b"), ("p.top",))
    graph = {"p.low.x": {"p.top.y"}, "p.mid_a.x": {"p.mid_b.y", "p.low.x", "p.mid_a.z"},
             "p.top.y": {"p.low.x", "p.mid_a.x"}, "p.mid_a.z": set(), "p.mid_b.y": set()}
    assert import_graph.layer_of("p.mid_a.x", layers) == (1, "p.mid_a")
    assert import_graph.layer_of("q.x", layers) is None
    assert import_graph.upward(graph, layers) == [("p.low.x", "p.top.y"), ("p.mid_a.x", "p.mid_b.y")]


def test_analysis_imports_downward_only():
    graph = import_graph.graph(tree=("analysis",))
    unplaced = [m for m in graph if import_graph.layer_of(m) is None]
    assert unplaced == [], "modules in no layer of import_graph.ANALYSIS_LAYERS"
    wrong = import_graph.upward(graph)
    assert wrong == [], "imports against analysis/'s layers:\n" + "\n".join(
        f"{a} -> {b}" for a, b in wrong)


def test_plots_and_the_store_reach_no_report_section_and_the_second_process_is_neutral():
    graph = import_graph.graph(tree=("analysis",))
    sections = import_graph.under(graph, "analysis.sections")
    for side in ("analysis.plots", "analysis.store"):
        chain = import_graph.crossing(graph, import_graph.under(graph, side), sections)
        assert chain is None, " -> ".join(chain)
    assert graph["analysis.second_process"] == set() and graph["analysis.tables"] == set()
    users = {m for m, targets in graph.items() if "analysis.second_process" in targets}
    assert users == {"analysis.plots.process", "analysis.store.keeper"}


def test_at_most_15_packages_and_modules_at_the_top():
    top = [f for f in os.listdir(os.path.join(ROOT, "analysis"))
           if f.endswith(".py") or os.path.isfile(os.path.join(ROOT, "analysis", f, "__init__.py"))]
    assert len(top) <= 15, sorted(top)


# One interpreter imports the libraries once, then forks a child per module that imports it
# first, nothing of the analysis loaded before it: what a fresh interpreter per module would
# find out, at a tenth of the cost.
FIRST = """
import importlib, os, sys
import numpy, pandas, tabulate, yaml
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException as exc:
            print(name, type(exc).__name__, exc, flush=True)
            os._exit(1)
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_every_module_imports_first_in_a_fresh_interpreter():
    names = [m for m in MODULES if m != "analysis.__main__"]
    done = subprocess.run([sys.executable, "-c", FIRST, *names], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
