"""No import circle anywhere in the suite: no module of analysis/, frameworks/, launchers/,
hydra_plugins/, benchmarks/, tests/ or launch.py imports one that imports it back,
directly or through others, counting imports inside functions (tests/import_graph.py).
And launchers/ one way: the planner decides, the backends and the driver execute; certify/
above launchers/ and analysis/, which never reach it."""
import textwrap

from tests import import_graph


def write(root, files: dict):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_a_circle_is_found_and_named_once():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert import_graph.cycles(graph) == [["a", "b", "c", "a"]]
    assert import_graph.cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    # two circles through one module are one tangle, named by its shortest circle
    assert import_graph.cycles({"a": {"b", "c"}, "b": {"a"}, "c": {"b"}}) == [["a", "b", "a"]]


def test_every_kind_of_import_is_an_edge(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\nimport pkg.c as c\n",
        "pkg/b.py": "def f():\n    from .c import thing  # lazy and relative\n",
        "pkg/c.py": "import os\nfrom pkg.sub import d\nthing = 1\n",
        "pkg/sub/__init__.py": "from ..a import x\n",
        "pkg/sub/d.py": "from . import e\n",
        "pkg/sub/e.py": "",
        "top.py": "from pkg import a, nothing_here\n",
    })
    graph = import_graph.graph(str(tmp_path), ("pkg", "top.py"))
    assert graph == {
        "pkg": set(), "pkg.a": {"pkg.b", "pkg.c"}, "pkg.b": {"pkg.c"},
        "pkg.c": {"pkg.sub.d"}, "pkg.sub": {"pkg.a"}, "pkg.sub.d": {"pkg.sub.e"},
        "pkg.sub.e": set(), "top": {"pkg.a", "pkg"}}
    assert import_graph.cycles(graph) == []


def test_a_lazy_import_back_is_a_circle(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/x.py": "from pkg import y\n",
                     "pkg/y.py": "def later():\n    from pkg.x import z\n"})
    assert import_graph.cycles(import_graph.graph(str(tmp_path), ("pkg",))) == [
        ["pkg.x", "pkg.y", "pkg.x"]]


def test_the_tree_has_no_import_circle():
    graph = import_graph.graph()
    # the walk reaches every part of the tree, lazy imports included
    assert {"launch", "analysis.report.contents", "frameworks.common.harness", "launchers.backends.slurm.launcher",
            "hydra_plugins.dlbench_launcher.launcher", "tests.slurm_cluster.cluster",
            "benchmarks.analysis_scale"} <= set(graph)
    assert "frameworks.paddle.loader" in graph["frameworks.paddle.worker"]  # inside build
    circles = import_graph.cycles(graph)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_a_crossing_is_found_through_other_modules():
    graph = {"p.a": {"x"}, "x": {"y"}, "y": {"b.c"}, "b.c": set(), "p.d": set()}
    assert import_graph.under(graph, "p") == {"p.a", "p.d"}
    assert import_graph.crossing(graph, {"p.a", "p.d"}, {"b.c"}) == ["p.a", "x", "y", "b.c"]
    assert import_graph.crossing(graph, {"p.d"}, {"b.c"}) is None


def test_launchers_planner_and_backends_import_one_way():
    """No module of launchers/backends/ or launchers/driver/ (what runs points) reaches
    launchers/plan/ (what decides them), and no module of launchers/plan/ reaches a backend
    or the driver: not directly, not through another module (the shared parts are
    launchers/suite.py, sweepdir.py, auto.py and contract/)."""
    graph = import_graph.graph()
    plan = import_graph.under(graph, "launchers.plan")
    execute = import_graph.under(graph, "launchers.backends") | import_graph.under(graph, "launchers.driver")
    assert {"launchers.plan.points", "launchers.plan.sweep"} <= plan
    assert {"launchers.backends.slurm.launcher", "launchers.driver.repeats"} <= execute
    for sources, targets in ((execute, plan), (plan, execute)):
        chain = import_graph.crossing(graph, sources, targets)
        assert chain is None, "launchers/ imports the wrong way: " + " -> ".join(chain)


def test_certify_sits_above_launchers_and_analysis():
    """certify/ imports launchers/ and analysis/ (it runs the one's parts, then the other's);
    nothing of the suite reaches it but the command line (launch.py) and the tests."""
    graph = import_graph.graph()
    mine = import_graph.under(graph, "certify")
    assert {"certify.command", "certify.run", "certify.baselines"} <= mine
    assert any(t.startswith("launchers.") for m in mine for t in graph[m])
    assert any(t.startswith("analysis.") for m in mine for t in graph[m])
    others = import_graph.outside(graph, ("certify", *import_graph.ABOVE["certify"]))
    assert {"launchers.plan.sweep", "analysis.gate.compare", "contract.paths"} <= others
    chain = import_graph.crossing(graph, others, mine)
    assert chain is None, " -> ".join(chain)
