"""Reference figures kept as data, for the regression gate (analysis/gate/compare.py).

A reference file (YAML, or JSON when it ends in .json; benchmarks/references/) is

    schema: dlbench.reference
    version: 1
    system: dgx-h100          # the default of each entry's `system`
    tolerance: 0.05           # the default of each entry's relative tolerance
    entries:
      - config: {framework: pytorch, model: resnet50, size: full, precision: amp,
                 batch_size: 256, nodes: 1, gpus_per_node: 8, compile: false}
        metric: throughput    # see METRICS
        value: 21500.0
        unit: samples/s
        tolerance: 0.05       # optional
        lower_is_better: false  # optional; the metric's own sense by default
        image: sha256:...     # optional: the container image it was measured in (its digest,
                              # else its reference); a point that ran in another gets a note

An entry's config keys: CONFIG_KEYS, `model.<key>` for MODEL_KEYS, `search` for a search's
key; `bench` and `op` for a collective's (bench=comm, metric busbw_gbps) or a checkpoint's
(bench=checkpoint, metric checkpoint_gbps) entry: an entry without `bench` is a training one.
`read_reference` reads and checks one (a file, or `published:NAME`: one throughput entry
per row of analysis/published/NAME.yaml, analysis/published/sources.py); `make_reference`
writes one from a past run (`python -m analysis reference`); `stored_reference` makes one
from the results store (`--reference store[:SWEEP]`); `figures` are a run's rows the entries
are matched against.
"""
import json
from typing import Any, cast

import yaml

from analysis import tables
from analysis.figures.checkpoint import checkpoint_table
from analysis.figures.comm import comm_table
from analysis.figures.metrics import MODEL_KEYS, TRAINING, metrics
from analysis.published import sources as published
from analysis.read import images
from analysis.read.record_file import RecordError
from contract import models, paths, values

SCHEMA = paths.REFERENCE_SCHEMA
# metric -> (column of analysis.figures.metrics.metrics, unit, lower is better)
METRICS = {
    "throughput": ("throughput", "samples/s", False),
    "latency_ms": ("latency_ms", "ms", True),
    "tokens_per_s": ("tokens_per_s", "tokens/s", False),
    "tflops_per_device": ("tflops_per_device", "TFLOP/s", False),
    "mfu": ("mfu", "fraction of peak", False),
    "peak_memory_gib": ("peak_memory_gib", "GiB", True),
    "largest_ok": ("largest_ok", "value of the searched key", False),
    # bench=comm: nccl-tests' average bus bandwidth of the entry's op (all its sizes and forms)
    "busbw_gbps": ("busbw_gbps", "GB/s", False),
    # bench=checkpoint: the checkpoint's durable GB/s (analysis/figures/checkpoint.py)
    "checkpoint_gbps": ("checkpoint_gbps", "GB/s", False),
}
STORE = "store"   # --reference store[:SWEEP]: a stored point as the baseline
CONFIG_KEYS = {"framework": "framework", "model": "model", "size": "model_size",
               "precision": "precision", "amp_dtype": "amp_dtype", "batch_size": "batch_size",
               "nodes": "nodes", "gpus_per_node": "gpus_per_node", "compile": "compile",
               "devices": "devices", "device": "device",   # device: analysis/figures/matching.py's rule
               "bench": "bench", "op": "op"}               # bench=comm and checkpoint entries
COMM_KEYS = ("framework", "nodes", "gpus_per_node", "device", "bench", "op")  # what a collective's is


def _bad(path, why):
    return RecordError(f"corrupt reference file {path}: {why}")


def _published(path) -> dict:
    """A reference's content from analysis/published/NAME.yaml (path: published:NAME)."""
    try:
        name, entries = published.reference_entries(str(path)[len(published.PREFIX):])
    except published.PublishedError as exc:
        raise RecordError(str(exc)) from None
    return {"schema": SCHEMA, "version": 1, "system": f"published:{name}", "tolerance": 0.05,
            "entries": entries}


def read_reference(path, system=None, tolerance=None, data=None) -> tuple:
    """(system shown, entries with defaults filled), checked; RecordError on bad input.
    `path`: a reference file, or published:NAME; `data`: its content, where already made
    (stored_reference); `tolerance` replaces every entry's."""
    if data is not None:
        pass
    elif str(path).startswith(published.PREFIX):
        data = _published(path)
    else:
        try:
            with open(path) as f:
                text = f.read()
        except OSError as exc:
            raise RecordError(f"cannot read reference file {path}: {exc.strerror or exc}") from None
        try:
            data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise _bad(path, str(exc).splitlines()[0]) from None
    if tolerance is not None and not (values.is_number(tolerance) and 0 <= tolerance < 1):
        raise RecordError(f"--tolerance must be a fraction in [0, 1), got {tolerance}")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise _bad(path, f"not a {SCHEMA} file")
    if data.get("version") != 1:
        raise _bad(path, f"version {data.get('version')!r} is not 1")
    if not isinstance(data.get("entries"), list):
        raise _bad(path, "no list of entries")
    entries = []
    for n, e in enumerate(data["entries"], 1):
        if not isinstance(e, dict):
            raise _bad(path, f"entry {n} is not a mapping")
        e = {"system": data.get("system"), "tolerance": data.get("tolerance", 0.05), **e}
        if tolerance is not None:
            e["tolerance"] = tolerance
        if e.get("metric") not in METRICS:
            raise _bad(path, f"entry {n}: metric {e.get('metric')!r} is not one of {', '.join(METRICS)}")
        if not isinstance(e.get("config"), dict) or not e["config"]:
            raise _bad(path, f"entry {n}: no config")
        unknown = [k for k in e["config"] if k not in CONFIG_KEYS and k != "search"
                   and k not in {f"model.{m}" for m in MODEL_KEYS}]
        if unknown:
            raise _bad(path, f"entry {n}: unknown config key(s) {', '.join(unknown)}")
        for key in ("value", "tolerance"):
            v = e.get(key)
            if not values.is_number(v) or v < 0:
                raise _bad(path, f"entry {n}: {key} must be a number >= 0, got {v!r}")
        e.setdefault("lower_is_better", METRICS[e["metric"]][2])
        e.setdefault("unit", METRICS[e["metric"]][1])
        e["n"] = n
        entries.append(e)
    systems = sorted({str(e["system"]) for e in entries})
    if system is not None:
        entries = [e for e in entries if str(e["system"]) == system]
        if not entries:
            raise RecordError(f"reference file {path} has no entries for system {system!r} "
                              f"(it has: {', '.join(systems) or 'none'})")
    elif len(systems) > 1:
        raise RecordError(f"reference file {path} holds systems {', '.join(systems)}: "
                          "choose one with --system")
    return (system or (systems[0] if systems else None)), entries


def _search_rows(results) -> list:
    return [{"framework": s["framework"], "model": s["model"], "model_size": s.get("model_size"),
             "precision": s["precision"], "amp_dtype": None, "batch_size": s["batch_size"],
             "nodes": s["nodes"], "gpus_per_node": s["gpus_per_node"], "compile": s["compile"],
             "search": s["key"], "point": f"{s['point']} (search {s['key']})", "kind": "search",
             "status": "ok" if s.get("done") and not s.get("stopped") and s["largest_ok"] is not None
             else "failed", "largest_ok": s["largest_ok"]}
            for s in results.searches]


def _busbw(results) -> dict:
    """(sweep, point) -> {op: nccl-tests' average bus bandwidth} of the bench=comm points: the
    mean busbw over the op's sizes and forms (analysis/figures/comm.py, contract/busbw.py)."""
    table = comm_table(results)
    if not len(table):
        return {}
    table = table[table.op.notna()]   # a point that measured nothing has one row, op empty
    # one rank moves nothing: its op is a row with no bandwidth (contract/busbw.py's moves)
    return {(str(s), p): {op: None if tables.missing(v) else float(v) for op, v in
                          g.groupby("op", sort=False).busbw_avg.mean().items()}
            for (s, p), g in table.groupby(["sweep", "point"], sort=False)}


def figures(results) -> list:
    """Per-point figures (tries of a search left out) plus one row per search. A bench=comm
    point is a row per op it measured, with `op` and `busbw_gbps`; a bench=checkpoint point has
    `checkpoint_gbps` (its durable GB/s); neither has a training figure (TRAINING)."""
    m = metrics(results)
    m = m[m.search.isna()] if len(m) else m
    busbw = _busbw(results)
    durable = checkpoint_table(results)
    saved = {(str(s), p): g for s, p, g in zip(durable.sweep, durable.point, durable.gbps)}
    rows = []
    for r in cast(list[dict[str, Any]], m.to_dict("records")):
        r["kind"] = "point"
        r["peak_memory_gib"] = tables.gib(r["peak_memory_bytes"]) if r["peak_memory_bytes"] else None
        bench, key = r.get("bench") or "train", (str(r["sweep"]), r["point"])
        if bench != "train":
            r.update(dict.fromkeys(TRAINING))
        if bench == "comm":   # a point that measured nothing: one row, no op
            rows += [dict(r, op=op, busbw_gbps=v) for op, v in (busbw.get(key) or {None: None}).items()]
            continue
        if bench == "checkpoint":
            r["checkpoint_gbps"] = None if tables.missing(saved.get(key)) else saved[key]
        rows.append(r)
    return rows + _search_rows(results)


BENCH_METRICS = {"comm": "busbw_gbps", "checkpoint": "checkpoint_gbps"}


def entry_of(r: dict, device: bool = False, metric: str | None = None):
    """A reference entry of one ok point's (or search's) figures row (`figures`), with its
    `key` (configuration and metric, as text); None where it has no figure. The device is
    a key only when asked (a reference file's system names it); `metric`: this one, not the
    row's own (its model's spec's, a collective's busbw, a checkpoint's GB/s)."""
    if r["status"] != "ok":
        return None
    bench = r.get("bench") or "train"
    config = {k: r[col] for k, col in CONFIG_KEYS.items()
              if k != "devices" and (device or k != "device") and r.get(col) is not None
              and not (k == "amp_dtype" and r["precision"] != "amp")
              and (k != "bench" or bench != "train") and (bench != "comm" or k in COMM_KEYS)}
    config = {k: (v.item() if hasattr(v, "item") else v) for k, v in config.items()}
    if r["kind"] == "search":
        config["search"] = r["search"]
        metric = "largest_ok"
    elif bench in BENCH_METRICS:
        metric = metric or BENCH_METRICS[bench]
    else:
        spec = models.find(r["model"])   # its default metric and the settings that tell its points apart
        for k in spec.compare_keys if spec else ():
            v = r.get(k)
            if v is not None and v == v:
                config[f"model.{k}"] = v if isinstance(v, str) else int(v)
        metric = metric or (spec.metric if spec else "throughput")
    value = r.get(METRICS[metric][0])
    if tables.missing(value):
        return None
    unit = r["search"].split(".")[-1] if metric == "largest_ok" else METRICS[metric][1]
    return {"config": config, "metric": metric, "value": float(f"{value:.6g}"), "unit": unit,
            "key": json.dumps(config, sort_keys=True, default=str) + metric}


def stored_reference(reference: str, results, store=None) -> dict:
    """A reference's content from the results store (analysis/store/database.py): `store`, for each
    configuration of `results` (its device included), the last ok point stored before it
    from another sweep; `store:SWEEP`, the points of that stored sweep (name, key, path or
    archive)."""
    from analysis.store import history
    from analysis.store import commands as store_commands
    from analysis.store import rows as store_rows
    st = store_commands.open_store(store, False)
    frame = st.points(columns=("point", "status", "figures", "created_unix", "image", "image_digest"))
    frame = frame.assign(created=frame.sweep_created)
    selector = reference.partition(":")[2]
    if selector:
        frame = history.select(frame, sweep=selector)
    else:
        own = store_rows.sweep_keys(results)
        frame = frame[~frame.sweep_key.isin(set(own.values()))]
        made = [m.get("created_unix") for m in results.manifests.values() if m.get("created_unix")]
        if made:
            frame = frame[frame.created.notna() & (frame.created < min(made))]
    stored = stored_entries(frame)
    entries, alone = [], 0
    for r in figures(results):
        e = entry_of(dict(r, status="ok"), device=True)   # a failed point still meets its baseline
        if e is not None and e["key"] in stored:
            entries.append(stored.pop(e["key"]))
        elif r["kind"] == "point":
            alone += 1
    if not entries:
        raise RecordError(f"no point of {results.root} has a stored baseline in {st.name} (an ok "
                          "point of the same configuration and device"
                          + (f" in sweep {selector})" if selector else ", stored before it)"))
    return {"schema": SCHEMA, "version": 1, "system": f"store {st.name}", "tolerance": 0.05,
            "entries": entries, "without_baseline": alone}


def stored_entries(frame, metrics=(None,)) -> dict:
    """key -> entry of each configuration (its device included) of a frame of stored points
    (analysis/store/database.py `Store.points` with point, status, figures, image and
    image_digest, and `created`: the sweep's date): the newest ok point's, for each of
    `metrics` (None: the point's own)."""
    from analysis.store import history
    stored = {}
    for r in frame.iloc[::-1].itertuples():   # newest first: the last good run wins
        fig = dict(r.figures or {}, kind="point")
        fig["peak_memory_gib"] = tables.gib(fig["peak_memory_bytes"]) if fig.get("peak_memory_bytes") else None
        for metric in metrics:
            e = entry_of(fig, device=True, metric=metric)
            if e is not None and e["key"] not in stored:
                when = history.table_date(r.created)
                stored[e.pop("key")] = dict(e, point=f"stored: {r.sweep}" + (f" {when}" if when else ""),
                                            **({"image": r.image_digest or r.image} if r.image else {}))
    return stored


def make_reference(results, tolerance=0.05, system=None) -> dict:
    """A reference file's content from a past run: one entry per ok point and per search."""
    if not 0 <= tolerance < 1:
        raise RecordError(f"--tolerance must be a fraction in [0, 1), got {tolerance}")
    if system is None:
        names = sorted(set(results.runs.get("device", []).dropna().astype(str))) if len(results.runs) else []
        system = " + ".join(names) or "unknown"
    entries: list = []
    seen: dict = {}
    ran_in = images.of_points(results)
    for r in figures(results):
        e = entry_of(r)
        if e is None:
            continue
        if e["key"] in seen:
            raise RecordError(f"points {seen[e['key']]} and {r['point']} share a configuration: "
                              "make a reference from one sweep")
        seen[e.pop("key")] = r["point"]
        image = images.identity(ran_in.get((r.get("sweep"), r["point"])))
        if image:  # the container image it was measured in: compare says when a point's differs
            e["image"] = image
        entries.append(e)
    if not entries:
        raise RecordError(f"no ok point under {results.root} to make a reference from")
    return {"schema": SCHEMA, "version": 1, "system": system, "tolerance": tolerance,
            "source": str(results.root), "entries": entries}
