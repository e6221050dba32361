"""A certification's runs, in order (docs/certify.md): every item's points composed, made and
checked before anything runs (as a sweep's: Hydra's composition as `launch` composes, then
launchers/plan/sweep.py), and the health gate's point with them; then the health gate (the
step `launch health` runs: launchers/health/); then, when the nodes are healthy, each item's
sweep, one after another (items measured at once would disturb each other), each waited for
as `launch status --wait` waits (launchers/commands/status.py).

The points never run with preflight: a certification is of the nodes asked for, and a sick
node fails it, named, instead of being left out.
"""
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from certify.suite import Item, Suite
from contract import paths
from contract.point import Point
from launchers import auto
from launchers.backends.base import Launcher, NoVerdict
from launchers.commands import health as health_command
from launchers.commands import status
from launchers.plan import one_point, precheck, sweep
from launchers.suite import ConfigError

DEFAULTS = {"nodes": 1, "gpus_per_node": 1, "launcher": "auto", "cluster": "local"}
# where launcher=auto finds no cluster: two ranks, since a collective of one moves nothing
# (contract/busbw.py `moves`) and a certification item of it would have no figure
THIS_MACHINE = {"nodes": 1, "gpus_per_node": 2, "cluster": "local"}
WAIT_INTERVAL_S = 1.0   # a tiny item ends in seconds: a poll every 2 s costs a second each
# The system under test: nodes and gpus_per_node (ints), launcher and cluster (names), as the
# command line, the suite's YAML and DEFAULTS give them: Any, as their values differ in type.
System = dict[str, Any]
Gate = tuple[Point, Launcher]   # the health gate's point and its launcher


@dataclass
class Planned:
    item: Item
    folder: str                        # its sweep's folder in the certification
    made: list[tuple[Point, bool]]     # [(point, dry_run)]: launchers/plan/sweep.make_points'


def asked(suite: Suite, given: System) -> str:
    """The launcher asked for: the command line's, else the suite's, else auto."""
    return str({**DEFAULTS, **dict(suite.system), **given}["launcher"])


def system_of(suite: Suite, given: System) -> System:
    """The system under test: the command line's keys, else the suite's, else DEFAULTS, with
    launcher=auto resolved as a sweep's (launchers/auto.py). Where auto picks the local
    launcher (no controller answers), the system is this machine: one node of two ranks, cluster local,
    unless the command line says otherwise (a suite's nodes and cluster are its cluster's)."""
    system = {**DEFAULTS, **dict(suite.system), **given}
    if system["launcher"] == "auto":
        system["launcher"] = auto.choose()[0]
        if system["launcher"] == "local":
            system.update({k: v for k, v in THIS_MACHINE.items() if k not in given})
    return system


def system_overrides(system: System, nodes: int) -> list[str]:
    return [f"nodes={nodes}", f"gpus_per_node={system['gpus_per_node']}",
            f"launcher={system['launcher']}", f"cluster={system['cluster']}"]


def node_counts(item: Item, nodes: int) -> list[int]:
    """The item's node counts at a system of `nodes` nodes: `all` is every one; each once."""
    counts = [nodes if n == "all" else int(n) for n in item.nodes]
    over = [n for n in counts if n > nodes]
    if over:
        raise ConfigError(f"item {item.name}: nodes {over[0]}: the system under test has {nodes}")
    return list(dict.fromkeys(counts))


def compose(overrides: list[str], where: str) -> DictConfig:
    """A point's config from its overrides, checked first as `launch` checks them."""
    problem = precheck.check(overrides)
    if problem:
        raise ConfigError(f"{where}: {problem}")
    try:
        return one_point.compose(overrides)
    except one_point.bad_input() as exc:
        raise ConfigError(f"{where}: {str(exc).strip().splitlines()[0]}") from None


def _item_points(suite: Suite, item: Item, system: System, folder: str) -> Planned:
    jobs, where = [], os.path.join(folder, item.name)
    for num, n in enumerate(node_counts(item, system["nodes"])):
        given = [*suite.common, *item.overrides, *system_overrides(system, n), "preflight=false"]
        cfg = compose(given, f"item {item.name}")
        if item.op is not None and (cfg.bench.name != "comm" or item.op not in list(cfg.bench.ops)):
            raise ConfigError(f"item {item.name}: op {item.op} is judged, but its points do not "
                              f"measure it (bench={cfg.bench.name}, bench.ops: "
                              f"{list(cfg.bench.get('ops') or [])})")
        jobs.append(sweep.Job(cfg, where, num, given))
    try:
        return Planned(item, where, sweep.make_points(jobs))
    except ConfigError as exc:
        raise ConfigError(f"item {item.name}: {exc}") from None


def plan(suite: Suite, system: System, folder: str,
         health: Sequence[str] = ()) -> tuple[Gate, list[Planned]]:
    """(the health gate's (point, launcher), [Planned] per item): every point made and checked,
    nothing run; ConfigError (one line, naming the item) else."""
    given = [*system_overrides(system, system["nodes"]), *suite.health, *health]
    cfg = compose(given, "health gate")
    try:   # a folder of its own each time: a certification run again gets a gate of its own
        gate = health_command.make(cfg, given, paths.health_run_dir(folder))
    except ConfigError as exc:
        raise ConfigError(f"health gate: {exc}") from None
    return gate, [_item_points(suite, item, system, folder) for item in suite.items]


def health_gate(gate: Gate) -> dict[str, Any]:
    """The health step on the nodes asked for -> its verdict (launchers/health/verdict.py's);
    a step that gave no verdict is a failed gate, saying why."""
    point, launcher = gate
    os.makedirs(point.dir, exist_ok=True)
    try:
        return launcher.health(point)
    except NoVerdict as exc:
        return {"ok": False, "error": f"the health step gave no verdict: {exc}", "hosts": [],
                "sick": {}, "slow_links": []}


def run_items(planned: list[Planned], log: Callable[[str], object] = print) -> None:
    """Each item's points to their launchers, then waited for, one item after another."""
    for p in planned:
        log(f"certify: item {p.item.name}: {len(p.made)} point(s) in {p.folder}")
        sweep.submit(p.made)
        status.main([p.folder, "--wait", "--interval", str(WAIT_INTERVAL_S)])
