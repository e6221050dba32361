"""launchers/'s packages import downward only, in the layers tests/import_graph.py's
LAUNCHERS_LAYERS names once, lazy imports included: what every side reads (the registry,
suite.py, sweepdir.py, auto.py) < the backends' primitives (stopping.py, worker.py, then
step.py) < health/ < driver/ < the launcher objects (backends/) beside the planner (plan/) <
commands/. (That plan/ and the executing side never reach each other, even through others:
tests/unit/test_import_circles.py.)"""
from tests import import_graph

LAYERS = import_graph.LAUNCHERS_LAYERS


def test_every_launchers_module_has_a_layer_and_imports_downward_only():
    graph = import_graph.graph(tree=("launchers",))
    assert {"launchers.backends.slurm.launcher", "launchers.commands.health", "launchers.health.step"} <= set(graph)
    unplaced = [m for m in graph if import_graph.layer_of(m, LAYERS) is None]
    assert unplaced == [], "modules in no layer of import_graph.LAUNCHERS_LAYERS"
    wrong = import_graph.upward(graph, LAYERS)
    assert wrong == [], "imports against launchers/'s layers:\n" + "\n".join(
        f"{a} -> {b}" for a, b in wrong)


def test_a_primitive_below_the_driver_and_a_command_above_the_planner():
    """The backends' primitives are their own layers under the launcher objects: the driver
    may run them, they may not run the driver; the package `launchers` is its registry alone."""
    assert import_graph.layer_of("launchers.backends.stopping", LAYERS)[1] == "launchers.backends.stopping"
    assert import_graph.layer_of("launchers.backends.slurm.srun", LAYERS)[1] == "launchers.backends"
    assert import_graph.layer_of("launchers.plan.sweep", LAYERS)[1] == "launchers.plan"
    assert import_graph.layer_of("launchers", LAYERS)[0] == 0
    graph = {"launchers.driver.repeats": {"launchers.backends.stopping"},
             "launchers.backends.local": {"launchers.driver.repeats", "launchers.health.step"},
             "launchers.backends.stopping": {"launchers.driver.repeats"},     # the old circle
             "launchers.health.step": {"launchers.backends.step", "launchers.plan.points"},
             "launchers.plan.sweep": {"launchers", "launchers.backends.base"},
             "launchers.commands.health": {"launchers.plan.points", "launchers.backends.base"}}
    assert import_graph.upward(graph, LAYERS) == [
        ("launchers.backends.stopping", "launchers.driver.repeats"),
        ("launchers.health.step", "launchers.plan.points"),
        ("launchers.plan.sweep", "launchers.backends.base")]
