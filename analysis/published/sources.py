"""Published training throughputs (analysis/published/*.yaml) beside a run's points: "is my
number normal?"

Each file is one source (its README says the fields): `source`, `url`, `date`, `nodes_of`
(devices per node), `unit`, and `rows`, each with device, framework, model, precision,
batch_size (null or absent: any batch), devices, throughput and optionally speedup,
implementation, software, mode, data, note. A key given at the file's level (DEFAULTS) is
the default of every row's. A row with a `speedup` also implies the 1-device figure
throughput / speedup: `rows()` adds it, marked `derived` (with the arithmetic in
`derived_from`). Figures are never changed here.

A point matches a row (`matches`) when
- the point finished (ok or partial) with a throughput, of a full-size model (published
  figures are of the full models: a `tiny` point matches nothing);
- its device is the row's (analysis/figures/matching.py: same family, and form factor and memory
  where both names state them: "NVIDIA A100-SXM4-40GB" matches "A100 40GB");
- framework, model and precision are the row's, its device count is the row's `devices`,
  and its batch per device is the row's batch_size where the row names one (values by
  analysis/figures/matching.py's rule, the regression gate's and the layouts' too);
- a row with `mode: xla` matches compiled points only, `mode: tf.function` uncompiled ones.

The report's section "Published figures beside ours" (analysis/sections/published.py) lists
every match with ours / published (`beside`); a point that no row matches at its batch is set
beside the rows that match it at another batch, marked so (published figures are often at the
largest batch that fits: Lambda's ResNet-50 at 1280 per GPU); `reference_entries(name)` turns
a file into regression-gate entries for `python -m analysis compare SWEEP --reference
published:NAME`.

A file with `figure: wide_deep` holds DLPerf's Wide & Deep table instead (latency per
iteration and memory per device by vocabulary size): `wide_deep_rows()` reads it for the
report's wide_deep section; one with `figure: checkpoint`, published checkpoint times
(`checkpoint_rows()`); the throughput readers above leave both out.
"""
import glob
import os

import pandas as pd
import yaml

from analysis import tables
from analysis.figures import flops, matching
from contract import values

PUBLISHED_DIR = os.path.dirname(os.path.abspath(__file__))   # the files sit beside their readers
# What a file may say once for all of its rows (a row's own value wins).
DEFAULTS = ("source", "url", "date", "data", "nodes_of", "device", "framework",
            "implementation", "software", "model", "mode")
PREFIX = "published:"
THROUGHPUT = "throughput"  # a file's `figure` when it names none
_COMPILE_MODES = {"xla": True, "tf.function": False}


class PublishedError(ValueError):
    """A published file that cannot be read, or a name with no file."""


def _load(path):
    try:
        with open(path) as f:
            return yaml.load(f, Loader=flops.LOADER)
    except OSError as exc:
        raise PublishedError(f"cannot read published file {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PublishedError(f"published file {path}: {str(exc).splitlines()[0]}") from None


def _figure(path) -> str:
    """A file's `figure`: throughput unless it names another (an unreadable file counts as
    throughput, so that read_source says what is wrong with it)."""
    try:
        data = _load(path)
    except PublishedError:
        return THROUGHPUT
    return str(data.get("figure", THROUGHPUT)) if isinstance(data, dict) else THROUGHPUT


def names(folder: str = PUBLISHED_DIR, figure: str = THROUGHPUT) -> list:
    """The sources of one figure there are (throughputs unless told): names without .yaml."""
    return sorted(os.path.splitext(os.path.basename(p))[0]
                  for p in glob.glob(os.path.join(folder, "*.yaml")) if _figure(p) == figure)


def positive(v) -> bool:
    """A figure as a published file must give it: a number (contract/values.py) above 0."""
    return values.is_number(v) and v > 0


def read_source(path) -> dict:
    """One published file, checked: {name, source, date, data, unit, nodes_of, rows}; the
    rows with their file's defaults filled and the derived 1-device rows added."""
    name = os.path.splitext(os.path.basename(str(path)))[0]
    data = _load(path)
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise PublishedError(f"published file {path}: no list of rows")
    if data.get("figure", THROUGHPUT) != THROUGHPUT:
        raise PublishedError(f"published file {path} holds {data['figure']} figures, not throughputs")
    out = []
    for n, r in enumerate(data["rows"], 1):
        if not isinstance(r, dict):
            raise PublishedError(f"published file {path}: row {n} is not a mapping")
        row = {"file": name, **{k: data.get(k) for k in DEFAULTS}, "unit": data.get("unit", "samples/s"),
               "batch_size": None, "derived": False, "derived_from": None, **r, "n": n}
        for key in ("device", "framework", "model", "precision"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise PublishedError(f"published file {path}: row {n} has no {key}")
        if not values.is_integer(row.get("devices")) or row["devices"] < 1:
            raise PublishedError(f"published file {path}: row {n}: devices {row.get('devices')!r}")
        if not positive(row.get("throughput")):
            raise PublishedError(f"published file {path}: row {n}: throughput {row.get('throughput')!r}")
        if row["batch_size"] is not None and not values.is_integer(row["batch_size"]):
            raise PublishedError(f"published file {path}: row {n}: batch_size {row['batch_size']!r}")
        if row.get("speedup") is not None and not positive(row["speedup"]):
            raise PublishedError(f"published file {path}: row {n}: speedup {row['speedup']!r}")
        out.append(row)
        if row.get("speedup") is not None and row["devices"] > 1:
            out.append(dict(row, devices=1, throughput=row["throughput"] / row["speedup"],
                            speedup=None, derived=True,
                            derived_from=f"{row['throughput']:.10g} / {row['speedup']:.10g} "
                                         f"(its {row['devices']}-device figure / speedup)"))
    return {"name": name, "source": data.get("source"), "url": data.get("url"),
            "date": data.get("date"), "data": data.get("data"),
            "unit": data.get("unit", "samples/s"), "nodes_of": data.get("nodes_of"), "rows": out}


def rows_or_error(read) -> tuple:
    """(read(), None), or ([], the PublishedError) when a published file is bad: a report
    section says so and goes on without the published figures."""
    try:
        return read(), None
    except PublishedError as exc:
        return [], exc


def path_of(name: str, folder: str = PUBLISHED_DIR) -> str:
    path = os.path.join(folder, f"{name}.yaml")
    if "/" in name or not os.path.isfile(path):
        raise PublishedError(f"no published source {name!r} (there are: {', '.join(names(folder))})")
    return path


def rows(folder: str = PUBLISHED_DIR) -> list:
    """Every row of every published file (derived 1-device rows included)."""
    out = []
    for name in names(folder):
        out += read_source(os.path.join(folder, f"{name}.yaml"))["rows"]
    return out


def matches(point, row: dict, batch: bool = True) -> bool:
    """Whether a point (a row of Results.points: needs device, framework, model, model_size,
    precision, devices, batch_size, compile, status, throughput) is the row's setting; with
    batch=False, whatever batch the row names."""
    get = point.get if isinstance(point, dict) else lambda k, d=None: getattr(point, k, d)
    if get("status") not in ("ok", "partial") or tables.missing(get("throughput")):
        return False
    if get("model_size") not in (None, "full") and get("model_size") == get("model_size"):
        return False
    if not matching.same_device(get("device"), row["device"]):
        return False
    if not all(matching.same(get(k), row[k]) for k in ("framework", "model", "precision", "devices")):
        return False
    if batch and row.get("batch_size") is not None \
            and not matching.same(get("batch_size"), row["batch_size"]):
        return False
    mode = _COMPILE_MODES.get(str(row.get("mode")).lower())
    return mode is None or bool(get("compile")) == mode


def beside(points: pd.DataFrame, published: list) -> list:
    """[(point row, published row, ours / published)] for every match, in the points' order.
    A point no row matches at its batch gets the rows that match it at another batch, each
    a copy marked `other_batch`."""
    out = []
    for p in points.itertuples(index=False):
        found = [r for r in published if matches(p, r)] or \
            [dict(r, other_batch=True) for r in published if matches(p, r, batch=False)]
        out += [(p, r, p.throughput / r["throughput"]) for r in found]
    return out


def describe(row: dict) -> str:
    """The published row's source in a few words: file: implementation, software, mode,
    batch, derived arithmetic, data, note, url."""
    words = [str(row.get("implementation") or row["framework"])]
    for key in ("software", "mode"):
        if row.get(key):
            words.append(str(row[key]))
    words.append(f"bs {row['batch_size']}" if row.get("batch_size") is not None else "bs not stated")
    if row.get("other_batch"):
        words[-1] += " (not our batch)"
    if row["derived"]:
        words.append(f"derived: {row['derived_from']}")
    if row.get("data"):
        words.append(f"data: {row['data']}")
    if row.get("clip_grad") is False:
        words.append("no gradient clipping")
    if row.get("note"):
        words.append(str(row["note"]))
    if row.get("url"):
        words.append(str(row["url"]))
    return f"{row['file']} ({row.get('date') or 'undated'}): " + ", ".join(words)


def reference_entries(name: str, folder: str = PUBLISHED_DIR) -> tuple:
    """(system, entries) of the regression gate (analysis/gate/compare.py) from one published
    file: one throughput entry per row, derived rows included, each matching by device,
    framework, model (full size), precision, device count and batch where the row names
    one; entries are `published`: a row no point of the run matches is not run, not failed."""
    src = read_source(path_of(name, folder))
    return src["name"], [row_entry(r) for r in src["rows"]]


def row_entry(r: dict) -> dict:
    """One published row (read_source's) as a regression-gate entry (reference_entries)."""
    config = {"framework": r["framework"], "model": r["model"], "size": "full",
              "precision": r["precision"], "devices": r["devices"], "device": r["device"]}
    if r.get("batch_size") is not None:
        config["batch_size"] = r["batch_size"]
    mode = _COMPILE_MODES.get(str(r.get("mode")).lower())
    if mode is not None:
        config["compile"] = mode
    return {"config": config, "metric": "throughput", "value": float(r["throughput"]),
            "unit": r.get("unit") or "samples/s", "published": True, "label": describe(r)}


WIDE_DEEP = "wide_deep"


def wide_deep_rows(folder: str = PUBLISHED_DIR) -> list:
    """Every row of the files whose `figure` is wide_deep (DLPerf's W&D table), checked, with
    their file's fields: {file, source, date, device, devices, nodes_of, batch_size,
    batch_per_device, data, framework, implementation, deep_vocab_size, latency_ms,
    memory_mb, status}; status is ok, or oom where the row says so (no figures then)."""
    out = []
    for name in names(folder, WIDE_DEEP):
        path = os.path.join(folder, f"{name}.yaml")
        data = _load(path)
        if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
            raise PublishedError(f"published file {path}: no list of rows")
        fields = {k: data.get(k) for k in ("source", "date", "device", "devices", "nodes_of",
                                           "batch_size", "batch_per_device", "data")}
        for n, r in enumerate(data["rows"], 1):
            if not isinstance(r, dict):
                raise PublishedError(f"published file {path}: row {n} is not a mapping")
            row = {"file": name, **fields, "implementation": None, "latency_ms": None,
                   "memory_mb": None, "status": "ok", **r}
            if not isinstance(row.get("framework"), str) or not row["framework"]:
                raise PublishedError(f"published file {path}: row {n} has no framework")
            vocab = row.get("deep_vocab_size")
            if not values.is_integer(vocab) or vocab < 1:
                raise PublishedError(f"published file {path}: row {n}: deep_vocab_size {vocab!r}")
            if row["status"] not in ("ok", "oom"):
                raise PublishedError(f"published file {path}: row {n}: status {row['status']!r}")
            for key in ("latency_ms", "memory_mb"):
                if row["status"] == "ok" and not positive(row[key]):
                    raise PublishedError(f"published file {path}: row {n}: {key} {row[key]!r}")
            out.append(row)
    return out


CHECKPOINT = "checkpoint"


def checkpoint_rows(folder: str = PUBLISHED_DIR) -> list:
    """The published checkpoint figures (the files whose `figure` is checkpoint), as their
    files give them, each with its source."""
    rows = []
    for name in names(folder, CHECKPOINT):
        data = _load(os.path.join(folder, f"{name}.yaml"))
        for row in data.get("rows") or ():
            rows.append({**{k: data.get(k) for k in ("source", "url", "date")}, **row})
    return rows
