"""The suite's own import graph, read from the source with `ast` (nothing is imported), and
the circles in it.

A module is a .py file under one of TREE (a package's __init__.py is the package). An
import adds an edge to the deepest module of the tree it names: `import a.b.c` to a.b.c;
`from a.b import c` to a.b.c where that is a module, else to a.b (c is a name in it);
relative imports are resolved against the importing file's package. Imports inside
functions count: a lazy import in a circle is still a circle of design. Imports of
anything outside the tree (the standard library, frameworks) are not edges.
"""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = ("analysis", "certify", "contract", "frameworks", "healthchecks", "launchers", "hydra_plugins",
        "benchmarks", "tests", "launch.py")
# certify/ runs launchers' parts, then analysis's: it sits above both, and only launch.py (the
# command line) and the tests import it.
ABOVE = {"certify": ("launch", "tests")}


def outside(graph: dict, packages) -> set:
    """The modules of the graph in none of `packages` (each a package or a module)."""
    return {m for m in graph if not any(m == p or m.startswith(p + ".") for p in packages)}


def modules(root: str = ROOT, tree=TREE) -> dict:
    """{dotted module name: its file} for every .py under the tree."""
    out = {}
    for top in tree:
        path = os.path.join(root, top)
        if top.endswith(".py"):
            if os.path.isfile(path):
                out[top[:-3]] = path
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for f in sorted(files):
                if f.endswith(".py"):
                    parts = os.path.relpath(os.path.join(folder, f), root)[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    out[".".join(parts)] = os.path.join(folder, f)
    return out


def _package(name: str, path: str) -> str:
    """The package a module's relative imports start from."""
    return name if os.path.basename(path) == "__init__.py" else name.rpartition(".")[0]


def _deepest(dotted: str, known) -> str:
    """The longest prefix of a dotted name that is a module of the tree, or None."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in known:
            return ".".join(parts[:n])
    return None


def imports_of(name: str, path: str, known) -> set:
    """The modules of the tree (names in `known`) that one module imports."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = _package(name, path).split(".")
                pkg = pkg[:len(pkg) - node.level + 1]   # level 1: this package
                base = ".".join(p for p in pkg + base.split(".") if p)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        out |= {m for m in (_deepest(t, known) for t in targets if t) if m}
    out.discard(name)
    return out


def graph(root: str = ROOT, tree=TREE) -> dict:
    """{module: the modules of the tree it imports}."""
    mods = modules(root, tree)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def cycles(graph: dict) -> list:
    """Each circle once, as a path that starts and ends at its least module name: the
    strongly connected components of more than one module (Tarjan), each walked as one
    shortest circle through its least member."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):  # iterative Tarjan: a deep graph must not hit the recursion limit
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            node, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_circle(graph, comp) for comp in comps)


def _circle(graph: dict, comp: set) -> list:
    """The shortest path from the component's least module back to itself (breadth first)."""
    start = min(comp)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for w in sorted(graph.get(node, ())):
                if w == start:
                    return paths[node] + [start]
                if w in comp and w not in paths:
                    paths[w] = paths[node] + [w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no circle through {start}")  # a strongly connected set has one


def under(graph: dict, package: str) -> set:
    """The modules of a package: the package itself and everything below it."""
    return {m for m in graph if m == package or m.startswith(package + ".")}


def crossing(graph: dict, sources, targets):
    """The shortest chain of imports from a module of `sources` to one of `targets`, direct
    or through others (breadth first), or None where there is none."""
    targets = set(targets)
    paths = {s: [s] for s in sorted(sources)}
    frontier = list(paths)
    while frontier:
        nxt = []
        for node in frontier:
            for w in sorted(graph.get(node, ())):
                if w in targets:
                    return paths[node] + [w]
                if w not in paths:
                    paths[w] = paths[node] + [w]
                    nxt.append(w)
        frontier = nxt
    return None


# analysis/'s layers, lowest first: a module imports its own package's modules and those of
# lower layers only; the packages of one layer do not import each other. (The package
# `analysis` itself, its __init__, is the public surface: it sits with __main__ on top.)
ANALYSIS_LAYERS = (
    ("analysis.tables", "analysis.terminal", "analysis.second_process"),  # cells, printing, a worker
    ("analysis.figures",),                         # the method and the figures by it
    ("analysis.read", "analysis.published"),       # a sweep's files -> Results; published figures
    ("analysis.sections", "analysis.plots", "analysis.store"),  # the report's parts; the store
    ("analysis.gate", "analysis.report"),          # the regression gate; the report whole
    ("analysis", "analysis.__main__"),             # the public surface and the command line
)


# launchers/'s layers, lowest first, by the same rule. A name holds its package's modules but
# those a lower layer names (the backends' primitives, which the health step and the driver
# run, sit below the launcher objects that run the driver). The registry (`launchers`, its
# __init__) names the backends by string and imports one only when asked: it sits at the
# bottom with what every side reads.
LAUNCHERS_LAYERS = (
    ("launchers", "launchers.suite", "launchers.sweepdir", "launchers.auto",
     "launchers.callbacks"),                       # the registry, the checkout, the sweep's files
    ("launchers.backends.stopping", "launchers.backends.worker"),  # the owner stopped; a rank's Python
    ("launchers.backends.step",),                  # how a step's ranks end
    ("launchers.health",),                         # the health step, its verdict, its settings
    ("launchers.driver",),                         # in an allocation: preflight, repeats, search
    ("launchers.backends", "launchers.plan"),      # the launcher objects; the planner, apart
    ("launchers.commands",),                       # launch status, cancel, dataset, doctor, health
)


def layer_of(module: str, layers=ANALYSIS_LAYERS):
    """(layer index, the package or module of that layer) a module belongs to, or None. A
    top-level package (`analysis`, `launchers`) names its __init__ alone."""
    best = None
    for i, names in enumerate(layers):
        for name in names:
            inside = module == name or ("." in name and module.startswith(name + "."))
            if inside and (best is None or len(name) > len(best[1])):
                best = (i, name)
    return best


def upward(graph: dict, layers=ANALYSIS_LAYERS) -> list:
    """Every import of a layered module that does not run downward: to a higher layer, or to
    another package of its own layer; sorted (importer, imported)."""
    out = []
    for module, targets in graph.items():
        mine = layer_of(module, layers)
        if mine is None:
            continue
        for t in targets:
            theirs = layer_of(t, layers)
            if theirs is None or theirs[1] == mine[1]:
                continue
            if theirs[0] >= mine[0]:
                out.append((module, t))
    return sorted(out)
