"""The regression gate: a run's figures against reference figures kept as data.

    python -m analysis reference RESULTS --out FILE [--tolerance 0.05] [--system NAME]
    python -m analysis compare RESULTS --reference FILE [--system NAME] [--tolerance T]
    python -m analysis compare RESULTS --reference published:NAME [--tolerance T]

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

An entry matches the one point whose configuration agrees on every key it gives (keys:
CONFIG_KEYS, `model.<key>` for MODEL_KEYS, `search` for a search's key). The gate is
one-sided: a figure fails when it is worse than the reference by more than the tolerance;
better passes (say so, and refresh the reference). An entry without its point, or whose
point did not finish ok, fails too. Exit 0: all pass; 1: one fails; 2: bad input.

`--reference published:NAME` takes the entries from analysis/published/NAME.yaml
(analysis/published.py): one throughput entry per published row (and per 1-device row a
stated speedup implies), keyed by the row's device (the same device by
analysis/matching.py's rule), framework, model (full size), precision, device count
(`devices`) and batch per device where the row names one. A published row that no point
of the run matches is NOT RUN, which is not a failure; when no row matches at all the
comparison is bad input (exit 2). `--tolerance` replaces every entry's tolerance.

`--reference store` takes, for each configuration of the run (its device included), the
last ok point of the results store (analysis/store.py) from another sweep stored before it:
"this week against the last good run", however long ago its folder was deleted.
`--reference store:SWEEP` takes the points of that stored sweep (its name, key, path or
archive). A point with no stored baseline is left out, and said; none at all is bad input.
"""
import json
import math
import sys

import yaml
from tabulate import tabulate

from analysis import images, load, matching, published, tables
from analysis.record_file import RecordError
from analysis.metrics import MODEL_KEYS, metrics
from analysis.terminal import say
from contract import models, paths, values

SCHEMA = paths.REFERENCE_SCHEMA
# metric -> (column of analysis.metrics.metrics, unit, lower is better)
METRICS = {
    "throughput": ("throughput", "samples/s", False),
    "latency_ms": ("latency_ms", "ms", True),
    "tokens_per_s": ("tokens_per_s", "tokens/s", False),
    "tflops_per_device": ("tflops_per_device", "TFLOP/s", False),
    "mfu": ("mfu", "fraction of peak", False),
    "peak_memory_gib": ("peak_memory_gib", "GiB", True),
    "largest_ok": ("largest_ok", "value of the searched key", False),
}
STORE = "store"   # --reference store[:SWEEP]: a stored point as the baseline
CONFIG_KEYS = {"framework": "framework", "model": "model", "size": "model_size",
               "precision": "precision", "amp_dtype": "amp_dtype", "batch_size": "batch_size",
               "nodes": "nodes", "gpus_per_node": "gpus_per_node", "compile": "compile",
               "devices": "devices", "device": "device"}   # device: analysis/matching.py's rule


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


def figures(results) -> list:
    """Per-point figures (tries of a search left out) plus one row per search."""
    m = metrics(results)
    m = m[m.search.isna()] if len(m) else m
    rows = m.to_dict("records")
    for r in rows:
        r["kind"] = "point"
        r["peak_memory_gib"] = tables.gib(r["peak_memory_bytes"]) if r["peak_memory_bytes"] else None
    return rows + _search_rows(results)


def _matches(row: dict, config: dict) -> bool:
    for key, want in config.items():
        if key == "search":
            have = row.get("search")
        elif key == "device":   # the same name is the same device, a CPU's too
            if not (row.get("device") == want or matching.same_device(row.get("device"), want)):
                return False
            continue
        elif key.startswith("model."):
            have = row.get(key[len("model."):])
        else:
            have = row.get(CONFIG_KEYS[key])
        if tables.missing(have) or not matching.same(have, want):
            return False
    return True


def _describe(config: dict) -> str:
    """pytorch resnet50/full amp bs256 1x8 model.seq_len=2048: the entry's keys, briefly."""
    c = dict(config)
    name = "/".join(str(c.pop(k)) for k in ("model", "size") if k in c)
    words = [str(c.pop(k)) for k in ("framework",) if k in c] + ([name] if name else [])
    words += [str(c.pop(k)) for k in ("precision", "amp_dtype") if k in c]
    if "batch_size" in c:
        words.append(f"bs{c.pop('batch_size')}")
    if "nodes" in c and "gpus_per_node" in c:
        words.append(tables.allocation(c.pop("nodes"), c.pop("gpus_per_node")))
    if "compile" in c:
        words += ["compile"] if c.pop("compile") else []
    if "devices" in c:
        words.append(f"{c.pop('devices')} dev")
    if "device" in c:
        words.append(f"on {c.pop('device')}")
    return " ".join(words + [f"{k}={v}" for k, v in c.items()])


def verdicts(results, entries) -> list:
    """[(entry, value, delta, verdict)]: PASS, FAIL, MISSING, FAIL (the point's status), or
    UNSUPPORTED: the point cannot run on this machine (its reason is in the report), which
    is not a regression; the gate counts it apart and does not fail on it. A published entry
    (analysis/published.py) without its point is NOT RUN, also counted apart, and one that
    matches several points gives a verdict for each (the entry's `point` names it)."""
    rows = figures(results)
    out = []
    for e in entries:
        kind = "search" if e["metric"] == "largest_ok" else "point"
        found = [r for r in rows if r["kind"] == kind and _matches(r, e["config"])]
        if len(found) > 1 and e.get("published"):
            for row in found:
                out += verdicts_of(dict(e, point=row["point"]), row)
            continue
        if len(found) > 1:
            raise RecordError(f"reference entry {e['n']} ({_describe(e['config'])}) matches "
                              f"{len(found)} points: add configuration keys, or compare one sweep")
        if not found:
            out.append((e, None, None, "NOT RUN" if e.get("published") else "MISSING"))
            continue
        out += verdicts_of(dict(e, matched=(found[0].get("sweep"), found[0]["point"])), found[0])
    return out


def image_notes(results, found) -> list:
    """One line per entry measured in another container image than its point ran in (the
    reference's `image`, written by `reference`): not the same measurement (analysis/images.py)."""
    ran_in, notes = images.of_points(results), []
    for e, *_ in found:
        if "image" not in e or not e.get("matched"):
            continue
        mine = ran_in.get(e["matched"])
        if images.identity(mine) != e["image"]:
            notes.append(f"note: entry {e['n']} ({_describe(e['config'])}) was measured in image "
                         f"{e['image'] or 'none'}; point {e['matched'][1]} ran in "
                         f"{images.label(mine)}: not the same measurement")
    return notes


def verdicts_of(e: dict, row: dict) -> list:
    """[(entry, value, delta, verdict)] of one entry on the one point (or search) it matches."""
    value = row.get(METRICS[e["metric"]][0])
    if row["status"] == "unsupported":
        return [(e, None, None, "UNSUPPORTED")]
    if row["status"] not in ("ok", "partial") or tables.missing(value):
        return [(e, None, None, f"FAIL ({row['status']})")]
    ref = e["value"]
    delta = (value - ref) / ref if ref else (0.0 if value == ref else math.inf)
    worse = delta if e["lower_is_better"] else -delta
    return [(e, value, delta, "PASS" if worse <= e["tolerance"] + 1e-12 else "FAIL")]


def _num(v) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def warn_corrupt(results) -> None:
    """One line on stderr when bad record files cost repeats (the report lists them)."""
    if results.corrupt:
        print(f"warning: {len(results.corrupt)} corrupt record file(s) under {results.root}: "
              f"their repeats are marked corrupt (python -m analysis report lists them)",
              file=sys.stderr)


def cmd_compare(args) -> int:
    results = load(args.path)
    warn_corrupt(results)
    stored = str(args.reference) == STORE or str(args.reference).startswith(STORE + ":")
    data = stored_reference(args.reference, results, args.store) if stored else None
    system, entries = read_reference(args.reference, args.system, args.tolerance, data)
    table, labels = [], []
    found, not_run = verdicts(results, entries), 0
    if str(args.reference).startswith(published.PREFIX):
        not_run = sum(v[3] == "NOT RUN" for v in found)
        found = [v for v in found if v[3] != "NOT RUN"]
        if not found:
            raise RecordError(f"no row of {args.reference} matches a point of {args.path} "
                              "(device, framework, model of full size, precision, devices, batch)")
    for e, value, delta, verdict in found:
        if e.get("label"):
            labels.append(f"[{len(labels) + 1}] {e['label']}")
        table.append([_describe(e["config"]) + (f" [{e['point']}]" if e.get("point") else "")
                      + (f" [{len(labels)}]" if e.get("label") else ""), e["metric"],
                      "-" if value is None else _num(value), f"{_num(e['value'])} {e['unit']}",
                      "-" if delta is None else f"{delta:+.1%}", f"{e['tolerance']:.0%}"
                      + (" (lower is better)" if e["lower_is_better"] else ""), verdict])
    say(f"# Regression gate: {args.path} against {args.reference} (system {system})\n")
    say(tabulate(table, headers=["configuration", "metric", "value", "reference", "delta",
                                 "tolerance", "verdict"], tablefmt="github", disable_numparse=True))
    if labels:
        say("\n" + "\n".join(labels))
    notes = image_notes(results, found)
    if notes:
        say("\n" + "\n".join(notes))
    unsupported = sum(row[-1] == "UNSUPPORTED" for row in table)
    failed = sum(not row[-1].startswith("PASS") for row in table) - unsupported
    say(f"\n{len(table) - failed - unsupported} of {len(table)} within tolerance"
        + (f"; {failed} failed or missing" if failed else "")
        + (f"; {unsupported} unsupported on this machine (not compared)" if unsupported else "")
        + (f"; {not_run} published row(s) of other settings not run here" if not_run else "")
        + (f"; {data['without_baseline']} point(s) without a stored baseline (not compared)"
           if data and data.get("without_baseline") else ""))
    return 1 if failed else 0


def entry_of(r: dict, device: bool = False):
    """A reference entry of one ok point's (or search's) figures row (`figures`), with its
    `key` (configuration and metric, as text); None where it has no figure. The device is
    a key only when asked (a reference file's system names it)."""
    if r["status"] != "ok":
        return None
    config = {k: r[col] for k, col in CONFIG_KEYS.items()
              if k != "devices" and (device or k != "device") and r.get(col) is not None
              and not (k == "amp_dtype" and r["precision"] != "amp")}
    config = {k: (v.item() if hasattr(v, "item") else v) for k, v in config.items()}
    if r["kind"] == "search":
        config["search"] = r["search"]
        metric = "largest_ok"
    else:
        spec = models.find(r["model"])   # its default metric and the settings that tell its points apart
        for k in spec.compare_keys if spec else ():
            v = r.get(k)
            if v is not None and v == v:
                config[f"model.{k}"] = v if isinstance(v, str) else int(v)
        metric = spec.metric if spec else "throughput"
    value = r.get(METRICS[metric][0])
    if tables.missing(value):
        return None
    unit = r["search"].split(".")[-1] if metric == "largest_ok" else METRICS[metric][1]
    return {"config": config, "metric": metric, "value": float(f"{value:.6g}"), "unit": unit,
            "key": json.dumps(config, sort_keys=True, default=str) + metric}


def stored_reference(reference: str, results, store=None) -> dict:
    """A reference's content from the results store (analysis/store.py): `store`, for each
    configuration of `results` (its device included), the last ok point stored before it
    from another sweep; `store:SWEEP`, the points of that stored sweep (name, key, path or
    archive)."""
    from analysis import history, store_commands, store_rows
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
    stored = {}
    for r in frame.iloc[::-1].itertuples():   # newest first: the last good run wins
        fig = dict(r.figures or {}, kind="point")
        fig["peak_memory_gib"] = tables.gib(fig["peak_memory_bytes"]) if fig.get("peak_memory_bytes") else None
        e = entry_of(fig, device=True)
        if e is not None and e["key"] not in stored:
            when = history.table_date(r.created)
            stored[e.pop("key")] = dict(e, point=f"stored: {r.sweep}" + (f" {when}" if when else ""),
                                        **({"image": r.image_digest or r.image} if r.image else {}))
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


def make_reference(results, tolerance=0.05, system=None) -> dict:
    """A reference file's content from a past run: one entry per ok point and per search."""
    if not 0 <= tolerance < 1:
        raise RecordError(f"--tolerance must be a fraction in [0, 1), got {tolerance}")
    if system is None:
        names = sorted(set(results.runs.get("device", []).dropna().astype(str))) if len(results.runs) else []
        system = " + ".join(names) or "unknown"
    entries, seen, ran_in = [], {}, images.of_points(results)
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



def cmd_reference(args) -> int:
    results = load(args.path)
    warn_corrupt(results)
    ref = make_reference(results, args.tolerance, args.system)
    try:
        with open(args.out, "w") as f:
            if args.out.endswith(".json"):
                json.dump(ref, f, indent=1)
            else:
                yaml.safe_dump(ref, f, sort_keys=False, default_flow_style=None, width=100)
    except OSError as exc:
        raise RecordError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    say(f"reference: {args.out}: {len(ref['entries'])} entries, system {ref['system']!r}, "
        f"tolerance {ref['tolerance']:.0%}")
    return 0


def add_commands(sub) -> None:
    """The `compare` and `reference` subcommands of `python -m analysis`."""
    cmp = sub.add_parser("compare", help="the regression gate: figures against a reference file")
    cmp.add_argument("path", help="a sweep folder (or a folder of sweeps)")
    cmp.add_argument("--reference", required=True,
                     help="a reference file (YAML or JSON), published:NAME (analysis/published/NAME.yaml), "
                          "or store[:SWEEP] (the last good run stored before this one, or that sweep's)")
    cmp.add_argument("--system", help="the entries of this system (when the file holds several)")
    cmp.add_argument("--tolerance", type=float, default=None,
                     help="relative; replaces every entry's tolerance (default: the file's)")
    cmp.add_argument("--store", help="the results store --reference store reads (default: "
                                     "DLBENCH_STORE, else ~/.local/share/dlbench/results.sqlite)")
    ref = sub.add_parser("reference", help="a reference file from a past run")
    ref.add_argument("path", help="a sweep folder (or a folder of sweeps)")
    ref.add_argument("--out", required=True, help="the file to write (.yaml, or .json)")
    ref.add_argument("--tolerance", type=float, default=0.05, help="relative (default 0.05)")
    ref.add_argument("--system", help="the system's name (default: the devices of the run)")


COMMANDS = {"compare": cmd_compare, "reference": cmd_reference}
