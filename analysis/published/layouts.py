"""Published figures of parallel layouts (analysis/published/*.yaml with `figure: layouts`):
DLPerf's GPT table (OneFlow-GPT and Megatron-LM on V100), dgxc-benchmarking's and
torchtitan's Llama 3.1, dgxc-benchmarking's DeepSeek-V3. `rows()` reads them, checked; `find(point)` returns
the rows whose
layout is a point's.

A file gives its defaults once (any of FILE_KEYS), `implementations` (name -> its
implementation, software, url) and `cases`: each a layout (LAYOUT and SETTINGS keys, `case`,
`group`, `size`) with one mapping of figures (FIGURES) per implementation that measured it.
A row is one case by one implementation (`impl`, its name in the file): the file's defaults,
then the implementation's, then the case's own keys, then its figures. What a source leaves to
arithmetic is derived and named in the row's `derived`: cp and ep 1 where they are not given;
dp = devices / (tp x pp x cp); accumulation = global / (micro x dp); tokens/s per GPU = a job's
tokens/s / devices; the padded vocabulary (contract/parallel.py's padded_vocab: up to a multiple
of vocab_multiple x tp where the file gives vocab_multiple, Megatron's rule, as the suite's
point of the same case pads it).

A row's arithmetic is checked by contract/parallel.py's relations, the ones every point of the
suite is checked by (dp x tp x pp x cp = devices, micro x dp x accumulation = global, local x
dp = global, ep dividing dp x cp x tp, hidden % heads and what its model's spec says tp
divides); the suite's own limits (layers % stages, the schedules' rules) are not asked of
other software's runs. A file whose arithmetic does not hold or whose fields are not of their
kind is refused in one line (published.PublishedError). Figures are never changed here.
A row's `model` is one model's (its spec's `published`, contract/models/): `of_section` gives
the rows of a report section's models.

A point (a mapping, framework-agnostic: nodes, gpus_per_node, dp, tp, pp, cp, ep,
micro_batch_size, global_batch_size, hidden, heads, layers, seq_len, precision, and optionally
the SETTINGS and device; `virtual_stages` for vp, as the suite's Layout names it) matches a row
when it states every LAYOUT key the row states, with the same value (cp and ep are 1 where the
point does not say), and agrees with the row on every SETTINGS key and on the
device (analysis/figures/matching.py) wherever both state them; values match by
analysis/figures/matching.py's rule, as the regression gate's and the throughput table's do.
"""
import os

from analysis.figures import matching
from analysis.published.sources import (DEFAULTS, PUBLISHED_DIR, PublishedError, _load, names,
                                        positive)
from contract import models, parallel, values

FIGURE = "layouts"
LAYOUT = ("nodes", "gpus_per_node", "dp", "tp", "pp", "cp", "ep", "micro_batch_size",
          "global_batch_size", "hidden", "heads", "layers", "seq_len", "precision")
SETTINGS = ("model", "vp", "fsdp", "amp_dtype", "compile", "schedule", "recompute", "async_tp",
            "float8")
POINT_DEFAULTS = {"cp": 1, "ep": 1}
# Other names a point may give a key by (contract/parallel.py's Layout.as_dict)
POINT_ALIASES = {"vp": "virtual_stages"}
INTS = ("nodes", "gpus_per_node", "dp", "tp", "pp", "cp", "ep", "vp", "micro_batch_size",
        "accumulation", "global_batch_size", "local_batch_size", "hidden", "heads", "layers",
        "seq_len", "vocab_size", "vocab_multiple")
FIGURES = ("latency_ms", "step_time_s", "memory_mib", "memory_gib", "samples_per_s",
           "tokens_per_s", "tokens_per_s_total", "tokens_per_s_per_gpu", "tflops_per_gpu",
           "peak_percent", "mfu_percent", "pflops")
FILE_KEYS = DEFAULTS + LAYOUT + SETTINGS + ("vocab_size", "vocab_multiple")
CASE_KEYS = FILE_KEYS + ("case", "group", "size", "local_batch_size", "accumulation")
IMPLEMENTATION_KEYS = ("implementation", "software", "url")


def _derive(row: dict, where: str) -> dict:
    """The derived fields of a row, and its arithmetic checked by the layout's own relations
    (contract/parallel.py: the grid, the batches, the experts' mesh, the shape against tp;
    the padded vocabulary by padded_vocab), every broken one in one line."""
    derived: list = []
    for key in ("cp", "ep"):
        if row.get(key) is None:
            row[key], derived = 1, derived + [key]
    devices = row["nodes"] * row["gpus_per_node"]
    dp, bad = parallel.data_parallel(devices, row["tp"], row["pp"], row["cp"], row.get("dp"))
    if row.get("dp") is None:
        row["dp"], derived = dp, derived + ["dp"]
    mbs, gbs = row.get("micro_batch_size"), row.get("global_batch_size")
    if mbs and gbs:
        accumulation, more = parallel.accumulation_of(mbs, dp, gbs, row.get("accumulation"))
        bad += more
        if row.get("accumulation") is None and not more:
            row["accumulation"], derived = accumulation, derived + ["accumulation"]
    if gbs and row.get("local_batch_size"):
        bad += parallel.replica_violations(row["local_batch_size"], dp, gbs)
    bad += parallel.expert_grid_violations(dp, row["cp"], row["tp"], row["ep"])
    spec = models.published(row.get("model"))
    bad += parallel.shape_violations({**row, "name": spec.name if spec else None}, row["tp"])
    if bad:
        raise PublishedError(f"{where}: {'; '.join(bad)}")
    if row.get("tokens_per_s_total") and row.get("tokens_per_s_per_gpu") is None:
        row["tokens_per_s_per_gpu"] = row["tokens_per_s_total"] / devices
        derived.append("tokens_per_s_per_gpu")
    if row.get("vocab_size"):
        row["padded_vocab_size"] = parallel.padded_vocab(row["vocab_size"], row["tp"], row.get("vocab_multiple"))
        derived.append("padded_vocab_size")
    row["devices"] = devices
    row["derived"] = derived
    return row


def read_layouts(path) -> list:
    """One `figure: layouts` file, checked: its rows (one per case and implementation)."""
    name = os.path.splitext(os.path.basename(str(path)))[0]
    data = _load(path)
    if not isinstance(data, dict) or data.get("figure") != FIGURE:
        raise PublishedError(f"published file {path}: not a `figure: {FIGURE}` file")
    impls, cases = data.get("implementations"), data.get("cases")
    if not isinstance(impls, dict) or not impls or not all(isinstance(v, dict) for v in impls.values()):
        raise PublishedError(f"published file {path}: no mapping of implementations")
    if not isinstance(cases, list) or not cases:
        raise PublishedError(f"published file {path}: no list of cases")
    defaults = {k: data[k] for k in FILE_KEYS if k in data}
    out = []
    for n, case in enumerate(cases, 1):
        where = f"published file {path}: case {n}"
        if not isinstance(case, dict) or not isinstance(case.get("case"), str):
            raise PublishedError(f"{where} is not a mapping with a `case` name")
        where = f"published file {path}: case {case['case']}"
        unknown = set(case) - set(CASE_KEYS) - set(impls)
        if unknown:
            raise PublishedError(f"{where}: unknown keys {', '.join(sorted(map(str, unknown)))} "
                                 f"(implementations: {', '.join(impls)})")
        measured = [i for i in impls if i in case]
        if not measured:
            raise PublishedError(f"{where}: no figures of any implementation ({', '.join(impls)})")
        for impl in measured:
            figures = case[impl]
            if not isinstance(figures, dict) or not figures or set(figures) - set(FIGURES):
                raise PublishedError(f"{where}: {impl}'s figures must be a mapping of "
                                     f"{', '.join(FIGURES)}")
            bad = [k for k, v in figures.items() if not positive(v)]
            if bad or figures.get("peak_percent", 1) > 100 or figures.get("mfu_percent", 1) > 100:
                raise PublishedError(f"{where}: {impl}'s {', '.join(bad) or 'percentage'} is not a "
                                     "positive number (at most 100 for a percentage)")
            row = {"file": name, "impl": impl, **defaults,
                   **{k: impls[impl][k] for k in IMPLEMENTATION_KEYS if k in impls[impl]},
                   **{k: v for k, v in case.items() if k not in impls}, **figures}
            missing = [k for k in ("nodes", "gpus_per_node", "tp", "pp", "hidden", "heads",
                                   "layers", "seq_len", "precision", "device") if row.get(k) is None]
            if missing:
                raise PublishedError(f"{where}: no {', '.join(missing)}")
            bad = [k for k in INTS if row.get(k) is not None
                   and not (values.is_integer(row[k]) and row[k] > 0)]
            if bad:
                raise PublishedError(f"{where}: {', '.join(f'{k} {row[k]!r}' for k in bad)} "
                                     "(a positive integer)")
            out.append(_derive(row, where))
    return out


def rows(folder: str = PUBLISHED_DIR) -> list:
    """Every row of every `figure: layouts` file."""
    out = []
    for name in names(folder, FIGURE):
        out += read_layouts(os.path.join(folder, f"{name}.yaml"))
    return out


def matches(point: dict, row: dict) -> bool:
    """Whether a point's layout is the row's (see the module)."""
    for key in LAYOUT:
        if row.get(key) is None:
            continue
        mine = point.get(key, POINT_DEFAULTS.get(key))
        if mine is None or not matching.same(mine, row[key]):
            return False
    for key in SETTINGS:
        mine = point.get(key, point.get(POINT_ALIASES.get(key)))
        if mine is not None and row.get(key) is not None and not matching.same(mine, row[key]):
            return False
    return point.get("device") is None or matching.same_device(point["device"], row["device"])


def find(point: dict, published: list | None = None) -> list:
    """The published rows whose layout is the point's, in the files' order."""
    return [r for r in (rows() if published is None else published) if matches(point, r)]


def of_section(rows: list, section: str) -> list:
    """The rows whose model reports in `section` (its spec's `report`, contract/models/)."""
    out = []
    for r in rows:
        spec = models.published(r.get("model"))
        if spec and spec.report == section:
            out.append(r)
    return out
