"""A certification's baselines, `certify.baseline=` (docs/certify.md, "How baselines are
matched"): whatever is given becomes the regression gate's reference entries
(analysis/gate/reference.py: a configuration, a metric, a value), and a point's baseline is
the entry the gate's one matcher finds (`find`: analysis/gate/compare.py `matches`, by
analysis/figures/matching.py's rule: every key the entry gives agrees with the point's, the
device by its family, form and memory).

    (not given)   the suite's published rows where one is a planned point's; else the
                  newest earlier certification of the suite on the same system (its folder
                  beside this one's, outputs/ by default, or the results store's) that is;
                  else none: the first certification records the suite's baseline (`default`)
    published     each item's published row, as its suite names it
                  (analysis/published/: a throughput file's row, or a layouts file's case and
                  implementation with the figure taken); an item whose suite says `none` has
                  none
    none          nothing: every point is measured and recorded, none judged
    FOLDER        an earlier certification, a sweep, or a folder of them: each ok point's
                  figures (its configuration and device), on every metric the suite judges
    ARCHIVE       the same, from its .tar.zst (analysis/read/archive.py)
    store:NAME    the results store's certification NAME (its folder's name, key, folder or
                  archive): each item's measured figure; or its sweep NAME: each point's
    FILE          a reference file (.yaml, .yml or .json), the regression gate's format
"""
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.figures import matching
from analysis.gate import compare
from analysis.gate.reference import METRICS, entry_of, figures, read_reference, stored_entries
from analysis.published import layouts, sources
from analysis.read import archive
from analysis.read.load import load
from analysis.read.record_file import RecordError
from analysis.read.results import Results
from certify.suite import Item, Suite
from contract import models, paths

PUBLISHED, NONE, STORE = "published", "none", "store:"
REFERENCE_SUFFIXES = (".yaml", ".yml", ".json")
# A layouts file's figure -> (our metric, the factor to it)
LAYOUT_FIGURES = {"tokens_per_s_total": ("tokens_per_s", 1.0), "mfu_percent": ("mfu", 0.01),
                  "tflops_per_gpu": ("tflops_per_device", 1.0), "samples_per_s": ("throughput", 1.0),
                  "latency_ms": ("latency_ms", 1.0)}
# A gate reference entry (analysis/gate/reference.py: config, metric, value, unit, source, ...)
# and a published or figures row: JSON, so Any.
Entry = dict[str, Any]


class BaselineError(ValueError):
    """A baseline that cannot be used: `lines`, one per mistake (exit status 2)."""

    def __init__(self, lines: str | Iterable[str]) -> None:
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("; ".join(self.lines))


@dataclass
class Baselines:
    kind: str                 # published, none, folder, archive, store, reference
    name: str = ""            # what was given (a path, store:NAME); never a store's URL
    entries: list[Entry] = field(default_factory=list)
    why: str = ""             # where none was given: why this one (`default`)

    def as_dict(self) -> dict[str, str | int]:
        return {"kind": self.kind, "name": self.name, "entries": len(self.entries)}


def _select(rows: list[Entry], selector: dict[str, Any]) -> list[Entry]:
    return [r for r in rows if r.get("derived") is not True   # a derived 1-device row: no
            and all(matching.same(r.get(k), v) for k, v in selector.items())]


def _throughput_entry(item: Item, ref: dict[str, Any], path: str) -> Entry:
    found = _select(sources.read_source(path)["rows"], ref["row"])
    if len(found) != 1:
        raise BaselineError(f"item {item.name}: published row {ref['row']} of {ref['source']} "
                            f"is {len(found)} rows, not one")
    if item.metric != "throughput" or "figure" in ref:
        raise BaselineError(f"item {item.name}: {ref['source']} publishes throughput (samples/s); "
                            f"the item is judged on {item.metric}")
    row = found[0]
    e = sources.row_entry(row)
    impl = row.get("implementation")
    e["note"] = (f"baseline: {impl}'s figure ({row.get('software') or 'software not stated'}), "
                 "another implementation than the suite's: not the same measurement") if impl else None
    return e


def _layouts_entry(item: Item, ref: dict[str, Any], path: str) -> Entry:
    found = _select(layouts.read_layouts(path), ref["row"])
    if len(found) != 1:
        raise BaselineError(f"item {item.name}: published case {ref['row']} of {ref['source']} is "
                            f"{len(found)} rows (a case and an implementation: impl), not one")
    row, figure = found[0], ref.get("figure")
    if figure not in LAYOUT_FIGURES or row.get(figure) is None:
        raise BaselineError(f"item {item.name}: figure {figure!r}: one of the case's "
                            f"{', '.join(f for f in LAYOUT_FIGURES if row.get(f) is not None)}")
    metric, factor = LAYOUT_FIGURES[figure]
    if metric != item.metric:
        raise BaselineError(f"item {item.name}: figure {figure} is {metric}; the item is judged on {item.metric}")
    spec = models.published(row.get("model"))
    config = {"model": spec.name if spec else row.get("model"), "size": row.get("size"),
              "precision": row["precision"], "devices": row["devices"], "device": row["device"]}
    config.update({k: row[k] for k in ("amp_dtype",) if row.get(k)})
    config.update({f"model.{k}": row[k] for k in ("seq_len",) if row.get(k)})
    grid = " ".join(f"{k}{row[k]}" for k in ("tp", "pp", "cp", "ep", "dp") if row.get(k))
    impl = row.get("implementation") or row["impl"]
    label = (f"{row['file']} ({row.get('date') or 'undated'}): case {row['case']}, {impl}, "
             f"{row.get('software') or ''}, {figure} {row[figure]:g}, {row.get('url') or ''}")
    return {"config": config, "metric": metric, "value": float(row[figure]) * factor,
            "unit": METRICS[metric][1], "published": True, "label": label,
            "note": (f"baseline: {impl}'s figure ({row.get('software') or 'software not stated'}; "
                     f"its layout {grid}, global batch {row.get('global_batch_size') or 'not stated'}): "
                     "another implementation and layout than the suite's, not the same measurement")}


def published_entries(suite: Suite) -> list[Entry]:
    """Each item's published row as a gate entry (its `item`), or BaselineError: one line per
    item whose row is not there, is several, or is of another metric."""
    out: list[Entry] = []
    bad: list[str] = []
    for item in suite.items:
        ref = item.row
        if "none" in ref:
            continue
        try:
            path = sources.path_of(ref["source"])
            read = _layouts_entry if ref["source"] in sources.names(figure=layouts.FIGURE) \
                else _throughput_entry
            e = read(item, ref, path)
        except BaselineError as exc:
            bad += exc.lines
            continue
        except sources.PublishedError as exc:
            bad.append(f"item {item.name}: {exc}")
            continue
        out.append(dict(e, item=item.name, lower_is_better=METRICS[e["metric"]][2],
                        source=e.pop("label")))
    if bad:
        raise BaselineError(bad)
    return out


def from_results(results: Results, metrics: Iterable[str], where: str) -> list[Entry]:
    """A gate entry per ok point (its configuration and device) and metric it has a figure of."""
    out: list[Entry] = []
    seen: dict[object, str] = {}
    for r in figures(results):
        for m in metrics:
            e = entry_of(r, device=True, metric=m)
            if e is None:
                continue
            key = e.pop("key")
            if key in seen:
                raise BaselineError(f"certify.baseline={where}: points {seen[key]} and {r['point']} "
                                    "share a configuration: give one certification or sweep")
            seen[key] = r["point"]
            out.append(dict(e, lower_is_better=METRICS[m][2], source=f"{where}: {r['point']}"))
    return out


def _named(frame: pd.DataFrame, name: str, columns: Iterable[str]) -> pd.DataFrame:
    """The rows of a stored frame that `name` names: by any of `columns` (a name, a key, a
    path or its last part)."""
    full, hit = os.path.abspath(name), [False] * len(frame)
    for c in columns:
        for i, v in enumerate(frame[c]):
            v = os.path.normpath(v) if isinstance(v, str) else ""
            hit[i] = hit[i] or v in (name, full) or os.path.basename(v) == name
    rows: pd.DataFrame = frame[hit]   # pandas-stubs types a boolean row selection as Any
    return rows


def from_store(name: str, metrics: Iterable[str], store: str | None = None) -> list[Entry]:
    """A stored certification's items' figures (the newest of that name), else a stored
    sweep's points' figures."""
    from analysis.store import commands as store_commands
    from analysis.store import history
    st = store_commands.open_store(store, False)
    certs = _named(st.certifications(), name, ("name", "key", "path", "archive"))
    if len(certs):
        c = certs.sort_values("created_unix").iloc[-1]
        return [{"config": r["config"], "metric": r["metric"], "value": r["measured"],
                 "unit": r.get("unit"), "lower_is_better": bool(r.get("lower_is_better")),
                 "source": f"stored certification {c['key']}: {r['point']}"}
                for r in c["items"] or () if r.get("measured") is not None and r.get("config")
                and r.get("status") == "ok"]
    frame = st.points(columns=("point", "status", "figures", "created_unix", "image", "image_digest"))
    frame = history.select(frame.assign(created=frame.sweep_created), sweep=name)
    if not len(frame):
        raise BaselineError(f"certify.baseline=store:{name}: no certification or sweep of that "
                            f"name, key, folder or archive in the results store {st.name}")
    return [dict(e, lower_is_better=METRICS[e["metric"]][2], source=e.pop("point"))
            for e in stored_entries(frame, metrics).values()]


def resolve(given: object, suite: Suite, store: str | None = None) -> Baselines:
    """certify.baseline's value -> Baselines; BaselineError on bad input."""
    text = PUBLISHED if given is None else str(given)
    metrics = sorted({i.metric for i in suite.items})
    try:
        if text == PUBLISHED:
            return Baselines(PUBLISHED, "", published_entries(suite))
        if text == NONE:
            return Baselines(NONE)
        if text.startswith(STORE):
            return Baselines("store", text, from_store(text[len(STORE):], metrics, store))
        if archive.is_archive(text) or os.path.isdir(text):
            kind = "archive" if archive.is_archive(text) else "folder"
            return Baselines(kind, os.path.abspath(text), from_results(load(text, merge=True), metrics, text))
        if os.path.isfile(text) and text.endswith(REFERENCE_SUFFIXES):
            _, entries = read_reference(text)
            return Baselines("reference", os.path.abspath(text), [
                dict(e, source=f"{text}: entry {e['n']}") for e in entries])
    except RecordError as exc:   # a folder with no sweep, a bad archive or reference, the store's
        raise BaselineError(f"certify.baseline={text}: {exc}") from None
    raise BaselineError(f"certify.baseline={text}: not {PUBLISHED}, {NONE}, a folder, an archive "
                        f"(.tar.zst), {STORE}NAME or a reference file ({', '.join(REFERENCE_SUFFIXES)})")


def find(entries: list[Entry], row: Entry, item: Item, planned: bool = False) -> list[Entry]:
    """The entries of the item's metric (its own, for published rows) that a point's figures
    row is, by the gate's one matcher; `planned`: a row made before the point ran, whose
    device is not known yet (the entries' device is not asked)."""
    out = []
    for e in entries:
        if e["metric"] != item.metric or e.get("item") not in (None, item.name):
            continue
        config = {k: v for k, v in e["config"].items() if not (planned and k == "device")}
        if compare.matches(row, config):
            out.append(e)
    return out


SYSTEM_KEYS = ("nodes", "gpus_per_node", "launcher", "cluster")


def earlier(suite: str, system: dict[str, Any], beside: str, folder: str,
            store: str | None = None) -> list[str]:
    """The earlier certifications of `suite` on `system`, newest first, as certify.baseline
    values: their folders under `beside` (this one's parent: outputs/ by default; a folder
    before the store's record of it: the truth), then the results store's (store:KEY; a
    store that is off or cannot be read has none)."""
    same = tuple(system.get(k) for k in SYSTEM_KEYS)
    found: list[tuple[float, int, str]] = []
    for path in paths.certification_files(beside) if os.path.isdir(beside) else ():
        there = os.path.dirname(path)
        try:
            with open(path) as f:
                v = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(v, dict) and v.get("suite") == suite and os.path.abspath(there) != folder \
                and tuple((v.get("system") or {}).get(k) for k in SYSTEM_KEYS) == same:
            found.append((float(v.get("created_unix") or 0), 1, there))
    try:
        from analysis.store import commands as store_commands
        certs = store_commands.open_store(store, False).certifications()
    except RecordError:   # off, none yet, or unreadable: no stored certification to offer
        certs = pd.DataFrame()
    for c in certs.to_dict("records") if len(certs) else ():
        if c.get("suite") == suite and tuple(c.get(k) for k in SYSTEM_KEYS) == same \
                and os.path.abspath(str(c.get("path"))) != folder:
            found.append((float(c.get("created_unix") or 0), 0, STORE + str(c["key"])))
    return [name for *_, name in sorted(found, reverse=True)]


def default(suite: Suite, system: dict[str, Any], matches: Callable[[Baselines], int], beside: str,
            folder: str, store: str | None = None) -> Baselines:
    """certify.baseline not given: the suite's published rows where one is a planned point's
    (`matches(baselines)`: how many points some entry could be); else the newest earlier
    certification of the suite on this system that is; else none (the first certification
    records the suite's baseline: RECORDED)."""
    published = Baselines(PUBLISHED, "", published_entries(suite))
    if published.entries and matches(published):
        return published
    for given in earlier(suite.name, system, beside, folder, store):
        try:
            found = resolve(given, suite, store)
        except BaselineError:   # a broken earlier record: the next older
            continue
        if found.entries and matches(found):
            found.why = f"the newest earlier certification of suite {suite.name} on this system"
            return found
    why = "published rows" if published.entries else "published row"
    return Baselines(NONE, why=f"no {why} matches and no earlier certification of suite "
                               f"{suite.name} on this system: this one records its baseline")
