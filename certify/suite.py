"""A certification's suite, `conf/certify/<name>.yaml`, read and checked: every mistake one
line (docs/certify.md, "How to write a suite").

    description: what it certifies
    system:                         # the system under test's defaults; the command line wins
      nodes: 3
      gpus_per_node: 1
      launcher: slurm
      cluster: localtest
    threshold: 0.95                 # optional: every item's, unless the item gives its own
    health: [health.min_fraction=0.2]   # the health gate's settings, as `launch health` takes them
    common: [repeats=1, warmup_steps=1] # overrides every item's points get
    items:
      - name: resnet50              # its sweep's folder in the certification
        overrides: [model=resnet50, model.size=tiny, batch_size=4]
        nodes: [1, all]             # at 1 node and at all of the system's (the default)
        metric: throughput          # the regression gate's metrics (analysis/gate/reference.py)
        threshold: 0.9              # optional
        published: {none: no published figure on a CPU}    # or the row its baseline is:
        # published: {source: lambda_pytorch, row: {device: NVIDIA H100 SXM5 80GB,
        #             model: resnet50, precision: amp, devices: 8}}
        # published: {source: dgxc_llama3.1_h100, row: {case: llama3.1-8b-bf16-8gpu, impl: nemo},
        #             figure: tokens_per_s_total}
        note: said beside its verdict  # optional

A collective's item (`bench=comm`) is judged on `metric: busbw_gbps` of its `op`. The keys of
the system under test (nodes, gpus_per_node, launcher, cluster) and preflight are not an
item's: the health gate judges the nodes asked for, and a certification never leaves one out.
Each override is checked by the planner when the certification is planned (certify/run.py).
"""
import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Optional

import yaml

from analysis.gate.reference import METRICS
from contract import values
from launchers.suite import ROOT

SUITES = os.path.join(ROOT, "conf", "certify")
SYSTEM = {"nodes": int, "gpus_per_node": int, "launcher": str, "cluster": str}
TOP = ("description", "system", "threshold", "health", "common", "items")
ITEM = ("name", "overrides", "nodes", "metric", "op", "threshold", "published", "note")
ALL = "all"
# What an item may not set: the system under test is the command's, and preflight would leave
# a sick node out of the certification rather than fail it.
RESERVED = (*SYSTEM, "preflight", "output_root", "hydra")
JUDGED = tuple(m for m in METRICS if m != "largest_ok")   # a search is no certification item
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# A published row's (key, value) pairs as the suite's YAML gives them: a source's name, a row
# (a mapping of any YAML values), a figure's name; Any, as YAML's values are.
Published = tuple[tuple[str, Any], ...]


class SuiteError(ValueError):
    """A suite that cannot be used: `lines`, one per mistake."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = list(lines)
        super().__init__("; ".join(self.lines))


@dataclass(frozen=True)
class Item:
    name: str
    overrides: tuple[str, ...]
    nodes: tuple[int | str, ...]     # node counts and "all"
    metric: str
    op: Optional[str] = None         # metric busbw_gbps: the collective judged
    threshold: Optional[float] = None
    published: Published = ()        # (("none", why),) or the row's (key, value) pairs
    note: Optional[str] = None

    @property
    def row(self) -> dict[str, Any]:
        return dict(self.published)


@dataclass(frozen=True)
class Suite:
    name: str
    path: str
    sha256: str
    description: str
    system: tuple[tuple[str, int | str], ...]   # (key, value): the system under test's defaults
    threshold: Optional[float]
    health: tuple[str, ...]          # overrides of the health gate
    common: tuple[str, ...]          # overrides of every item's points
    items: tuple[Item, ...]


def names(folder: str | None = None) -> list[str]:
    folder = folder or SUITES
    try:
        return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml"))
    except OSError:
        return []


def positive(v: object) -> bool:
    return values.is_number(v) and v > 0


def _overrides(value: object, where: str, bad: list[str]) -> tuple[str, ...]:
    """A list of key=value overrides (text), each checked for its form here."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and "=" in v for v in value):
        bad.append(f"{where}: a list of key=value overrides, got {value!r}")
        return ()
    return tuple(value)


def key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _published(value: object, where: str, bad: list[str]) -> Published:
    if not isinstance(value, dict) or not value:
        bad.append(f"{where}: published: the row its baseline is ({{source: NAME, row: {{...}}}}) "
                   f"or why there is none ({{none: why}}), got {value!r}")
        return ()
    if "none" in value:
        if set(value) != {"none"} or not isinstance(value["none"], str) or not value["none"].strip():
            bad.append(f"{where}: published: {{none: why}} says why, and nothing else")
            return ()
        return (("none", value["none"].strip()),)
    unknown = sorted(set(value) - {"source", "row", "figure"})
    if unknown or not isinstance(value.get("source"), str) or not isinstance(value.get("row"), dict) \
            or not value["row"] or ("figure" in value and not isinstance(value["figure"], str)):
        bad.append(f"{where}: published: {{source: NAME, row: {{key: value, ...}}, figure: NAME}} "
                   f"(figure for a layouts file only), got {value!r}")
        return ()
    return tuple((k, value[k]) for k in ("source", "row", "figure") if k in value)


def _item(n: int, raw: object, bad: list[str], seen: set[str]) -> Item | None:
    where = f"item {n}"
    if not isinstance(raw, dict):
        bad.append(f"{where}: a mapping ({', '.join(ITEM)}), got {raw!r}")
        return None
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        bad.append(f"{where}: name {name!r} (letters, digits, _ . -: its sweep's folder)")
    else:
        where = f"item {name}"
        if name in seen:
            bad.append(f"{where}: a second item of that name")
        seen.add(name)
    unknown = sorted(set(raw) - set(ITEM))
    if unknown:
        bad.append(f"{where}: unknown key(s) {', '.join(map(str, unknown))} (valid: {', '.join(ITEM)})")
    overrides = _overrides(raw.get("overrides"), f"{where}: overrides", bad)
    for o in overrides:
        if key_of(o).split(".")[0] in RESERVED:
            bad.append(f"{where}: {o}: {key_of(o)} is not an item's (the system under test is "
                       "the command's; a certification never leaves a sick node out)")
    nodes = raw.get("nodes", [1, ALL])
    if not isinstance(nodes, list) or not nodes or len(set(map(str, nodes))) != len(nodes) or not all(
            n == ALL or (values.is_integer(n) and n >= 1) for n in nodes):
        bad.append(f"{where}: nodes: a list of node counts >= 1 and `all`, each once, got {nodes!r}")
        nodes = []
    metric = raw.get("metric")
    if metric not in JUDGED:
        bad.append(f"{where}: metric {metric!r} is not one of {', '.join(JUDGED)}")
    op = raw.get("op")
    if (metric == "busbw_gbps") != (op is not None) or (op is not None and not isinstance(op, str)):
        bad.append(f"{where}: op (the collective judged) is given with metric busbw_gbps, "
                   f"and only then; got metric {metric!r}, op {op!r}")
    threshold = raw.get("threshold")
    if threshold is not None and not positive(threshold):
        bad.append(f"{where}: threshold must be a number > 0, got {threshold!r}")
    note = raw.get("note")
    if note is not None and not isinstance(note, str):
        bad.append(f"{where}: note: a line of text, got {note!r}")
    if "published" not in raw:
        bad.append(f"{where}: published: say which published row is its baseline, or why "
                   "there is none ({none: why})")
        published: Published = ()
    else:
        published = _published(raw["published"], where, bad)
    return Item(name=str(name), overrides=overrides, nodes=tuple(nodes), metric=str(metric), op=op,
                threshold=threshold, published=published, note=note)


def parse(data: object, name: str, path: str = "", sha256: str = "") -> Suite:
    """A suite from a file's content; SuiteError with every mistake."""
    bad: list[str] = []
    if not isinstance(data, dict):
        raise SuiteError([f"suite {name}: a mapping of {', '.join(TOP)}, got {type(data).__name__}"])
    unknown = sorted(set(data) - set(TOP))
    if unknown:
        bad.append(f"unknown key(s) {', '.join(map(str, unknown))} (valid: {', '.join(TOP)})")
    system = data.get("system") or {}
    if not isinstance(system, dict) or set(system) - set(SYSTEM):
        bad.append(f"system: a mapping of {', '.join(SYSTEM)}, got {system!r}")
        system = {}
    for key, kind in SYSTEM.items():
        v = system.get(key)
        if v is not None and (not isinstance(v, kind) or isinstance(v, bool)
                              or (kind is int and isinstance(v, int) and v < 1)):
            bad.append(f"system: {key} must be {'an integer >= 1' if kind is int else 'a name'}, got {v!r}")
    threshold = data.get("threshold")
    if threshold is not None and not positive(threshold):
        bad.append(f"threshold must be a number > 0, got {threshold!r}")
    health = _overrides(data.get("health"), "health", bad)
    for o in health:
        if key_of(o).split(".")[0] != "health":
            bad.append(f"health: {o}: the health gate takes health.* settings only")
    common = _overrides(data.get("common"), "common", bad)
    for o in common:
        if key_of(o).split(".")[0] in RESERVED:
            bad.append(f"common: {o}: {key_of(o)} is not an item's")
    items = data.get("items")
    seen: set[str] = set()
    if not isinstance(items, list) or not items:
        bad.append("items: a list of at least one item")
        items = []
    made = [_item(n, raw, bad, seen) for n, raw in enumerate(items, 1)]
    if bad:
        raise SuiteError([f"suite {name}: {line}" for line in bad])
    return Suite(name=name, path=path, sha256=sha256, description=str(data.get("description") or ""),
                 system=tuple((k, system[k]) for k in SYSTEM if system.get(k) is not None),
                 threshold=threshold, health=health, common=common,
                 items=tuple(item for item in made if item is not None))   # none is: bad is empty


def read(name: str, folder: str | None = None) -> Suite:
    """conf/certify/<name>.yaml (or FOLDER/<name>.yaml), checked; SuiteError (an unknown suite,
    a bad file)."""
    folder = folder or SUITES
    path = os.path.join(folder, f"{name}.yaml")
    if not NAME.match(name or "") or not os.path.isfile(path):
        raise SuiteError([f"unknown suite {name!r} (there are: {', '.join(names(folder)) or 'none'}; "
                          f"each is {os.path.relpath(folder, ROOT)}/<name>.yaml)"])
    try:
        with open(path, "rb") as f:
            text = f.read()
        data = yaml.safe_load(text)
    except OSError as exc:
        raise SuiteError([f"suite {name}: cannot read {path}: {exc.strerror or exc}"]) from None
    except yaml.YAMLError as exc:
        raise SuiteError([f"suite {name}: {path} is not YAML: {str(exc).splitlines()[0]}"]) from None
    return parse(data, name, path, hashlib.sha256(text).hexdigest())
