"""Records on disk -> tidy DataFrames (points, runs: one per repeat, steps) and everything
else the report's sections read: comm measurements, search ledgers, each rank's
environment, each point's settings.

The one reader: this module is the only code of the analysis that opens a sweep's files,
and it opens each once; every other module of the analysis is a function of the
`Results` it returns. The layout and schema names are frameworks/common/layout.py's.

Works on partial sweeps: a point with fewer recorded repeats than asked is `partial` or
`missing`, never dropped.

Tolerant of bad files: a record file that is torn (truncated JSON), garbage, of a foreign
schema, malformed, or of a schema version newer than this analysis costs only its repeat.
The repeat is `corrupt`, with an error naming the file and the reason, the file is listed
in `Results.corrupt`, and everything else is loaded as usual; a point whose recorded
repeats are all corrupt is `corrupt` (frameworks/common/statuses.py). A bad point.json
costs its point (listed, left out of the tables), a bad search ledger its search. Only
input with no sweep in it at all is a RecordError.

Fast at scale: records are parsed with orjson where it is installed, steps are kept as
numpy columns (never a dict per step), and the steps DataFrame is built when first asked
for (`Results.steps`); the report writes them as Parquet from the columns. Memory grows
linearly with the number of steps.
"""
import copy
import operator
import os

import numpy as np
import pandas as pd

from analysis import flops, method
from frameworks.common import layout, statuses

try:
    from orjson import loads as _loads
except ImportError:  # the standard library's parser: the same results, slower
    from json import loads as _loads

CONFIG_COLUMNS = ["bench", "framework", "model", "model_size", "precision", "amp_dtype",
                  "compile", "batch_size", "nodes", "gpus_per_node", "devices"]
# The method's figures of a point (analysis/method.py): the median and its spread, the
# median's 95% interval, the steps' percentiles, straggler ratio and drift, the flags.
STAT_COLUMNS = ["ci_lo", "ci_hi", "ci_coverage", "step_p50", "step_p90", "step_p99",
                "straggler", "drift", "marks", "flag_spread", "flag_few_repeats", "flag_drift"]
# Model FLOPs and MFU (analysis/flops.py): added once the points are known (add_flops).
FLOP_COLUMNS = ["flops_per_sample", "tflops_per_device", "peak_tflops", "math_dtype",
                "peak_source", "mfu"]
POINT_COLUMNS = ["sweep", "point", *CONFIG_COLUMNS, "repeats", "mode", "throughput", "tp_min", "tp_max",
                 "tp_cv", "n_ok", "n_recorded", "status", "error", "peak_device_bytes", "device",
                 *STAT_COLUMNS, "speedup", "efficiency", "flag_baseline", "speedup_marks",
                 *FLOP_COLUMNS]
RUN_COLUMNS = ["point", "repeat", "status", "error", "log_tail", "ranks_recorded", "throughput",
               "window_s", "samples", "straggler", "drift"]
STEP_COLUMNS = ["point", "repeat", "rank", "host", "step", "phase", "start", "end", "samples",
                "loss", "duration"]
COMM_COLUMNS = ["sweep", "point", "repeat", "rank", "op", "bytes", "count", "dtype", "inplace",
                "iters", "time_s", "algbw_gbps", "busbw_gbps", "wrong"]
PHASES = ("warmup", "measure")
_PHASE_CODE = {p: i for i, p in enumerate(PHASES)}
_MEASURE = _PHASE_CODE["measure"]
# Steps are read column by column: one pass per field, straight into a numpy array.
_GET = {k: operator.itemgetter(k) for k in ("step", "phase", "start", "end", "samples", "loss")}
_NUMERIC = tuple((k, _GET[k], dtype) for k, dtype in (("step", np.int64), ("start", np.float64),
                                                      ("end", np.float64), ("samples", np.int64)))
# What a malformed record (valid JSON of the right schema, wrong inside) raises when read.
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


class RecordError(ValueError):
    """Input the analysis cannot work with at all: no sweep there, a report folder it cannot
    write, a bad reference file. (A bad record file costs only its repeat: CorruptFile.)"""


class CorruptFile(Exception):
    """A record file that cannot be used: torn, garbage, of a foreign schema, malformed,
    or of a newer schema version than this analysis knows (`newer`)."""

    def __init__(self, path, reason: str, newer: bool = False):
        self.path, self.reason, self.newer = str(path), reason, newer
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{'record' if self.newer else 'corrupt record'} file {self.path}: {self.reason}"


class Results:
    """What a sweep's records say. DataFrames for notebooks and the report:

    points        one row per sweep point, with the method's summary
    runs          one row per recorded repeat
    steps         one row per rank per step (built from numpy columns when first asked for)
    comm          one row per comm measurement (bench=comm): sweep, point, repeat, rank, op, ...

    and plain data for the report's other sections:

    searches      the search ledgers (launchers/search.py), as written
    environments  one entry per rank record read: sweep, point, repeat, rank, host,
                  framework, environment, profile (profile=true's trace, else None), parallel
                  (a layout's grid place and parameter counts) and pipeline (its bubble)
    manifests     (sweep, point) -> the point's point.json (its model settings, config, search)
    corrupt       one entry per bad file: file, reason, newer, sweep, point, repeat
    limits        the flags' thresholds the points were flagged with: max_cv, max_drift
    """

    def __init__(self, points, runs, steps=None, root="", *, comm=None, searches=(),
                 environments=(), manifests=None, corrupt=(), step_columns=None, limits=None):
        self.points, self.runs, self.root = points, runs, str(root)
        self.limits = {"max_cv": method.MAX_CV, "max_drift": method.MAX_DRIFT, **(limits or {})}
        self._steps, self._columns = steps, step_columns
        self.comm = comm if comm is not None else pd.DataFrame(columns=COMM_COLUMNS)
        self.searches, self.environments = list(searches), list(environments)
        self.manifests, self.corrupt = dict(manifests or {}), list(corrupt)

    def __repr__(self) -> str:
        return (f"Results({self.root!r}: {len(self.points)} points, {len(self.runs)} runs, "
                f"{self.step_count()} steps, {len(self.corrupt)} corrupt files)")

    def with_points(self, points) -> "Results":
        """The same results restricted to some points (the special sections' view)."""
        other = copy.copy(self)
        other.points = points
        return other

    def manifest(self, sweep, point) -> dict:
        return self.manifests.get((str(sweep), point)) or {}

    def step_count(self) -> int:
        if self._columns is not None:
            return len(self._columns["step"])
        return 0 if self._steps is None else len(self._steps)

    @property
    def steps(self) -> pd.DataFrame:
        if self._steps is None:
            self._steps = self._step_frame()
        return self._steps

    @steps.setter
    def steps(self, frame) -> None:
        self._steps, self._columns = frame, None

    def _step_frame(self) -> pd.DataFrame:
        c = self._columns
        if c is None:
            return pd.DataFrame(columns=STEP_COLUMNS)
        return pd.DataFrame({
            "point": pd.Categorical.from_codes(c["point"], categories=c["point_names"]),
            "repeat": c["repeat"], "rank": c["rank"],
            "host": pd.Categorical.from_codes(c["host"], categories=c["host_names"]),
            "step": c["step"], "phase": pd.Categorical.from_codes(c["phase"], categories=PHASES),
            "start": c["start"], "end": c["end"], "samples": c["samples"], "loss": c["loss"],
            "duration": c["end"] - c["start"]}, copy=False)

    def steps_table(self):
        """The steps as a pyarrow Table, straight from the columns (no DataFrame)."""
        import pyarrow as pa

        c = self._columns
        if c is None:
            return pa.Table.from_pandas(self.steps, preserve_index=False)

        def dictionary(codes, names):
            return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(names, pa.string()))

        return pa.table({
            "point": dictionary(c["point"], c["point_names"]), "repeat": c["repeat"],
            "rank": c["rank"], "host": dictionary(c["host"], c["host_names"]), "step": c["step"],
            "phase": dictionary(c["phase"], list(PHASES)), "start": c["start"], "end": c["end"],
            "samples": c["samples"], "loss": c["loss"], "duration": c["end"] - c["start"]})

    def write_steps(self, path) -> None:
        """steps.parquet (one row per rank per step; pandas.read_parquet reads it back)."""
        import pyarrow.parquet as pq

        pq.write_table(self.steps_table(), str(path), compression="zstd",
                       use_dictionary=["point", "repeat", "rank", "host", "phase", "samples"])


# ---- reading one file ------------------------------------------------------------------
def read_record(path, schema: str) -> dict:
    """One JSON record file of `schema`, or CorruptFile saying why not."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise CorruptFile(path, f"cannot read it: {exc.strerror or exc}") from None
    if not data.strip():
        raise CorruptFile(path, "empty file (a torn write?)")
    try:
        obj = _loads(data)
    except ValueError as exc:  # orjson's JSONDecodeError and json's are ValueErrors
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        pos = getattr(exc, "pos", None)
        torn = ("end of data" in text or text.startswith("Unterminated")
                or (isinstance(pos, int) and pos >= len(data.rstrip()) - 1))
        raise CorruptFile(path, f"{'truncated JSON (a torn write?)' if torn else 'not JSON'}: "
                                f"{text}") from None
    if not isinstance(obj, dict):
        raise CorruptFile(path, f"not a {schema} record (a JSON {type(obj).__name__})")
    if obj.get("schema") != schema:
        raise CorruptFile(path, f"not a {schema} record (schema {obj.get('schema')!r})")
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CorruptFile(path, f"not a {schema} record (version {version!r})")
    if version > layout.SCHEMA_VERSION:
        raise CorruptFile(path, f"{schema} version {version} is newer than this analysis "
                                f"(knows {layout.SCHEMA_VERSION})", newer=True)
    return obj


def _field(d: dict, key: str, kind, optional: bool = False):
    """d[key], checked to be of `kind` (None allowed when optional); TypeError/KeyError else."""
    value = d[key] if not optional else d.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"field {key!r} is {value!r}")
    return value


def _why(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r} field" if exc.args else "a field is missing"
    return str(exc) or type(exc).__name__


def _malformed(path, exc) -> CorruptFile:
    return CorruptFile(path, f"malformed: {_why(exc)}")


NUMBER = (int, float)


def point_row(point: dict, sweep: str) -> dict:
    """A point.json as the points table's row (TypeError/KeyError when malformed)."""
    model, framework = _field(point, "model", dict), _field(point, "framework", dict)
    row = {"sweep": sweep, "point": _field(point, "point", str),
           "bench": point.get("bench", "train"), "framework": _field(framework, "name", str),
           "model": _field(model, "name", str), "model_size": model.get("size"),
           "precision": _field(point, "precision", str), "amp_dtype": point.get("amp_dtype"),
           "compile": point["compile"], "batch_size": _field(point, "batch_size", int),
           "nodes": _field(point, "nodes", int), "gpus_per_node": _field(point, "gpus_per_node", int),
           "devices": _field(point, "world_size", int), "repeats": _field(point, "repeats", int),
           "mode": point.get("mode")}  # the mode that ran: eager, graph, jit, xla, ... (frameworks/common/modes.py)
    if row["devices"] < 1:
        raise ValueError(f"world_size {row['devices']}")
    return row


def rank_columns(rec: dict):
    """A rank record's steps as numpy columns, and the record without its steps
    (TypeError/KeyError/ValueError when malformed)."""
    _field(rec, "rank", int)
    _field(rec, "status", str)
    _field(rec, "host", str)
    _field(rec, "framework", dict)
    _field(rec, "environment", dict, optional=True)
    memory = _field(rec, "memory", dict)
    for key in ("peak_device_bytes", "peak_host_bytes"):
        _field(memory, key, NUMBER, optional=True)
    window = _field(rec, "window", dict, optional=True)
    if window is not None:
        _field(window, "start", NUMBER)
        _field(window, "end", NUMBER)
    for c in _field(rec, "comm", list, optional=True) or ():
        _field(c, "op", str)
        _field(c, "bytes", int)
        _field(c, "time_s", NUMBER)
    steps = _field(rec, "steps", list)
    n = len(steps)
    cols = {k: np.fromiter(map(get, steps), dtype, n) for k, get, dtype in _NUMERIC}
    cols["phase"] = np.fromiter(map(_PHASE_CODE.__getitem__, map(_GET["phase"], steps)), np.int8, n)
    try:
        cols["loss"] = np.fromiter(map(_GET["loss"], steps), np.float64, n)
    except TypeError:  # a step whose loss was never read (null): NaN
        cols["loss"] = np.array([s["loss"] for s in steps], np.float64)
    slim = {k: v for k, v in rec.items() if k != "steps"}
    return slim, cols


def search_ledger(path) -> dict:
    """A search ledger, checked (CorruptFile when bad)."""
    ledger = read_record(path, layout.SEARCH_SCHEMA)
    try:
        for key in ("point", "key", "framework", "model", "precision"):
            _field(ledger, key, str)
        for key in ("batch_size", "nodes", "gpus_per_node"):
            _field(ledger, key, int)
        for key in ("largest_ok", "smallest_oom"):
            _field(ledger, key, int, optional=True)
        for t in _field(ledger, "tries", list):
            _field(t, "value", int)
            _field(t, "outcome", str)
        if "compile" not in ledger:
            raise KeyError("compile")
    except _MALFORMED as exc:
        raise _malformed(path, exc) from None
    return ledger


# ---- the whole sweep -------------------------------------------------------------------
class _Reader:
    """Accumulates what the records say, point by point; `results()` assembles it."""

    def __init__(self, root: str, limits: dict = None):
        self.root = root
        self.limits = dict(limits or {})   # the flags' thresholds: max_cv, max_drift
        self.point_rows, self.run_rows, self.corrupt = [], [], []
        self.comm, self.environments, self.manifests, self.searches = [], [], {}, []
        self.cols = {k: [] for k in ("step", "phase", "start", "end", "samples", "loss")}
        self.owners = []      # per rank record read: (point code, repeat, rank, host code, steps)
        self.point_code, self.host_code = {}, {}

    def bad(self, c: CorruptFile, sweep=None, point=None, repeat=None) -> None:
        self.corrupt.append({"file": c.path, "reason": c.reason, "newer": c.newer,
                             "sweep": sweep, "point": point, "repeat": repeat})

    def point(self, point_file: str) -> None:
        pdir = os.path.dirname(point_file)
        sweep = layout.sweep_of(pdir)
        try:
            point = read_record(point_file, layout.POINT_SCHEMA)
            try:
                row = point_row(point, sweep)
            except _MALFORMED as exc:
                raise _malformed(point_file, exc) from None
        except CorruptFile as c:
            self.bad(c, sweep, os.path.basename(pdir))
            return
        self.manifests[(sweep, row["point"])] = point
        try:
            names = sorted(os.listdir(pdir))
        except OSError:
            names = []
        runs, durations = [], []
        for name in names:
            m = layout.REPEAT_RE.match(name)  # set-aside attempts (repeat-NN.interrupted-T): never
            if m and os.path.isdir(os.path.join(pdir, name)):
                run, timed = self.repeat(os.path.join(pdir, name), row, int(m.group(1)))
                runs.append(run)
                if timed is not None:
                    durations.append(timed)
        self.run_rows += runs
        self.point_rows.append(summarize_point(row, runs, durations, **self.limits))

    def repeat(self, rdir: str, prow: dict, repeat: int):
        """(the run's row, the durations of its ranks' timed steps: a numpy array for an ok
        training repeat, else None)."""
        name, sweep, world = prow["point"], prow["sweep"], prow["devices"]
        bad, ranks, cols, comm = [], {}, {}, []
        try:
            names = sorted(os.listdir(rdir))
        except OSError as exc:
            names, bad = [], [CorruptFile(rdir, f"cannot list it: {exc.strerror or exc}")]
        for fname in names:
            if not layout.RANK_RECORD_RE.match(fname):
                continue
            path = os.path.join(rdir, fname)
            try:
                rec = read_record(path, layout.RANK_SCHEMA)
                try:
                    slim, c = rank_columns(rec)
                except _MALFORMED as exc:
                    raise _malformed(path, exc) from None
                if not 0 <= slim["rank"] < world or slim["rank"] in ranks:
                    raise CorruptFile(path, f"malformed: rank {slim['rank']} "
                                            + ("twice" if slim["rank"] in ranks else
                                               f"in a world of {world}"))
            except CorruptFile as exc:
                bad.append(exc)
                continue
            del rec
            ranks[slim["rank"]], cols[slim["rank"]] = slim, c
            comm += self.keep_rank(sweep, name, repeat, slim, c)
        run, run_path = None, os.path.join(rdir, layout.RUN_FILE)
        if layout.RUN_FILE in names:
            try:
                run = read_record(run_path, layout.RUN_SCHEMA)
                try:
                    _field(run, "status", str)
                    _field(run, "error", str, optional=True)
                    _field(run, "log_tail", dict, optional=True)
                except _MALFORMED as exc:
                    raise _malformed(run_path, exc) from None
            except CorruptFile as exc:
                bad.append(exc)
        row = {"point": name, "repeat": repeat, "status": None, "error": None, "log_tail": None,
               "ranks_recorded": len(ranks), "throughput": None, "window_s": None, "samples": None,
               "straggler": None, "drift": None}
        timed = None
        if bad:
            pass  # corrupt: below
        elif run is not None:
            row.update(status=run["status"], error=run.get("error"), log_tail=run.get("log_tail"))
        elif len(ranks) == world:  # the driver died after its ranks finished
            row["status"], row["error"] = statuses.run_status(ranks, world)
        else:
            row.update(status="incomplete", error=f"repeat not finished (no {layout.RUN_FILE})")
        if row["status"] == "ok" and prow["bench"] == "train":  # comm: analysis/comm.py
            try:
                if len(ranks) != world:
                    raise ValueError(f"it says ok, but {world - len(ranks)} of {world} rank "
                                     "records are missing")
                timings, timed, first, second = [], [], 0.0, 0.0
                for r in sorted(ranks):
                    c = cols[r]
                    measure = c["phase"] == _MEASURE
                    timings.append(method.window_timing(c["samples"][measure], ranks[r]["window"]))
                    steps = c["end"][measure] - c["start"][measure]
                    a, b = method.halves(steps)
                    first, second, timed = first + a, second + b, timed + [steps]
                windows = [w for _, w in timings]
                row["throughput"] = method.throughput([s for s, _ in timings], windows)
                row["samples"] = sum(s for s, _ in timings)
                row["window_s"] = max(windows)
                row["straggler"] = method.straggler_ratio(windows)
                row["drift"] = method.drift(first, second)
                timed = np.concatenate(timed) if timed else None
            except _MALFORMED as exc:  # an ok repeat whose records give no throughput
                bad.append(CorruptFile(run_path if run is not None else rdir,
                                       f"inconsistent with its rank records: {_why(exc)}"))
                row.update(throughput=None, samples=None, window_s=None, straggler=None,
                           drift=None)
                timed = None
        if bad:
            for c in bad:
                self.bad(c, sweep, name, repeat)
            shown = "; ".join(c.message for c in bad[:3])
            row.update(status="corrupt", log_tail=None,
                       error=shown + (f"; and {len(bad) - 3} more" if len(bad) > 3 else ""))
            timed = None
        else:
            self.comm += comm
        any_rank = next(iter(ranks.values()), None)
        if any_rank:
            row["framework_version"] = any_rank["framework"].get("version")
            row["device"] = (any_rank.get("environment") or {}).get("device")
            row["hosts"] = ",".join(sorted({r["host"] for r in ranks.values()}))
            peaks = [r["memory"]["peak_device_bytes"] for r in ranks.values()
                     if r["memory"].get("peak_device_bytes") is not None]
            row["peak_device_bytes"] = max(peaks) if peaks else None
            row["peak_host_bytes"] = max((r["memory"].get("peak_host_bytes") or 0)
                                         for r in ranks.values())
        return row, timed

    def keep_rank(self, sweep, point, repeat, rec, cols) -> list:
        """What one good rank record contributes: its steps and environment; returns its
        comm results, which count unless its repeat is corrupt."""
        pcode = self.point_code.setdefault(point, len(self.point_code))
        hcode = self.host_code.setdefault(rec["host"], len(self.host_code))
        for k, v in cols.items():
            self.cols[k].append(v)
        self.owners.append((pcode, repeat, rec["rank"], hcode, len(cols["step"])))
        self.environments.append({"sweep": sweep, "point": point, "repeat": repeat,
                                  "rank": rec["rank"], "host": rec["host"],
                                  "framework": rec["framework"],
                                  "environment": rec.get("environment") or {},
                                  "profile": _dict_or_none(rec.get("profile")),  # profile=true
                                  # a layout's grid place and counts, a pipeline's bubble
                                  "parallel": _dict_or_none(rec.get("parallel")),
                                  "pipeline": _dict_or_none(rec.get("pipeline"))})
        return [{**c, "sweep": sweep, "point": point, "repeat": repeat, "rank": rec["rank"]}
                for c in rec.get("comm") or ()]

    def searches_of(self, sweeps) -> None:
        for path in layout.search_files(sweeps):
            try:
                self.searches.append(search_ledger(path))
            except CorruptFile as c:
                self.bad(c, sweep=os.path.dirname(os.path.dirname(path)))

    def step_columns(self):
        if not self.owners:
            return None
        owners = np.array(self.owners, dtype=np.int64).reshape(-1, 5)
        counts = owners[:, 4]
        out = {"point": np.repeat(owners[:, 0].astype(np.int32), counts),
               "repeat": np.repeat(owners[:, 1], counts),
               "rank": np.repeat(owners[:, 2], counts),
               "host": np.repeat(owners[:, 3].astype(np.int32), counts),
               "point_names": list(self.point_code), "host_names": list(self.host_code)}
        for k in list(self.cols):  # one column at a time: the parts go as the whole is made
            out[k] = np.concatenate(self.cols.pop(k))
        return out

    def results(self) -> Results:
        added = {"speedup", "efficiency", "flag_baseline", "speedup_marks", *FLOP_COLUMNS}
        points = pd.DataFrame(self.point_rows) if self.point_rows else pd.DataFrame(
            columns=[c for c in POINT_COLUMNS if c not in added])
        runs = pd.DataFrame(self.run_rows) if self.run_rows else pd.DataFrame(columns=RUN_COLUMNS)
        comm = pd.DataFrame(self.comm, columns=COMM_COLUMNS) if self.comm else None
        points = add_flops(add_speedup(points), self.manifests)
        points = points[[c for c in POINT_COLUMNS if c in points]
                        + [c for c in points if c not in POINT_COLUMNS]]
        return Results(points, runs, root=self.root, comm=comm,
                       searches=self.searches, environments=self.environments,
                       manifests=self.manifests, corrupt=self.corrupt,
                       step_columns=self.step_columns(), limits=self.limits)


def summarize_point(row: dict, runs: list, durations=(), max_cv: float = method.MAX_CV,
                    max_drift: float = method.MAX_DRIFT) -> dict:
    """A point's row: the method's figures over its ok repeats (analysis/method.py), its
    status and first error, its device; `durations`: the timed steps' durations of each ok
    repeat (numpy arrays), for the step-time percentiles."""
    ok = [r for r in runs if r["status"] == "ok" and r["throughput"] is not None]
    # comm repeats have no training throughput: their figures are analysis/comm.py's
    s = method.summarize(r["throughput"] for r in ok)
    row.update(throughput=s["median"], tp_min=s["min"], tp_max=s["max"], tp_cv=s["cv"],
               n_ok=sum(r["status"] == "ok" for r in runs), n_recorded=len(runs),
               ci_lo=s["ci_lo"], ci_hi=s["ci_hi"], ci_coverage=s["ci_coverage"])
    row["status"] = statuses.point_status((r["status"] for r in runs), row["repeats"])
    bad = next((r for r in runs if r["status"] != "ok" and r["error"]), None)
    row["error"] = bad["error"] if bad else None
    row["peak_device_bytes"] = max((r.get("peak_device_bytes") or 0 for r in runs), default=0) or None
    row["device"] = next((r["device"] for r in sorted(runs, key=lambda r: r["status"] != "ok")
                          if isinstance(r.get("device"), str)), None)
    q = method.percentiles(np.concatenate(durations) if len(durations) else ())
    row.update({f"step_p{k}": v for k, v in q.items()})
    row["straggler"] = method.median_of(r["straggler"] for r in ok)
    row["drift"] = method.median_of(r["drift"] for r in ok)
    if s["n"]:  # flags belong to a figure: a point without one has its status instead
        flags = method.point_flags(s["cv"], s["n"], row["drift"], max_cv, max_drift)
    else:
        flags = None
    row.update(marks=flags, flag_spread=bool(flags and "C" in flags),
               flag_few_repeats=bool(flags and "N" in flags),
               flag_drift=bool(flags and "D" in flags))
    return row


def add_speedup(points: pd.DataFrame) -> pd.DataFrame:
    """Speedup over the 1-device point of the same configuration, and efficiency; a
    speedup over a flagged baseline is flagged (flag_baseline, speedup_marks).

    The baseline comes from the same sweep; only a sweep without one borrows the median of
    the other sweeps' (a folder of sweeps taken on different days would otherwise divide
    one day's figure by another's)."""
    key = [c for c in CONFIG_COLUMNS if c not in ("nodes", "gpus_per_node", "devices")]
    same = [tuple(str(v) for v in row) for row in points[key].itertuples(index=False)]
    own = list(zip(points["sweep"].astype(str), same))
    flags = points["marks"] if "marks" in points else pd.Series([None] * len(points), dtype=object)
    base, base_flagged = {}, {}
    for o, cfg, devices, tp, f in zip(own, same, points.devices, points.throughput, flags):
        if devices == 1 and not _nan(tp):
            for k in (o, cfg):
                base.setdefault(k, []).append(tp)
                base_flagged[k] = base_flagged.get(k, False) or bool(isinstance(f, str) and f)
    base = {k: method.summarize(v)["median"] for k, v in base.items()}
    config = [o if o in base else cfg for o, cfg in zip(own, same)]
    points = points.copy()
    points["speedup"] = [None if _nan(tp) else method.speedup(tp, base.get(cfg))
                         for cfg, tp in zip(config, points.throughput)]
    points["efficiency"] = [method.efficiency(s, d) for s, d in zip(points.speedup, points.devices)]
    points["flag_baseline"] = [bool(not _nan(s) and d != 1 and base_flagged.get(cfg))
                               for cfg, s, d in zip(config, points.speedup, points.devices)]
    points["speedup_marks"] = [None if _nan(s) else
                               method.speedup_flags(f if isinstance(f, str) else "", b)
                               for s, f, b in zip(points.speedup, flags, points.flag_baseline)]
    return points


def add_flops(points: pd.DataFrame, manifests: dict) -> pd.DataFrame:
    """Model FLOPs per sample, achieved TFLOP/s per device, the peak of the dtype the math
    ran in and MFU, for every point whose model has a count (analysis/flops.py)."""
    rows = []
    for p in points.itertuples(index=False):
        point = manifests.get((str(p.sweep), p.point)) or {}
        model = point.get("model") if isinstance(point.get("model"), dict) else {}
        config = point.get("config") if isinstance(point.get("config"), dict) else {}
        per_sample = flops.flops_per_sample(model) if p.bench == "train" else None
        if per_sample is None:
            rows.append((None, None, None, None, None, None))
            continue
        achieved = None if _nan(p.throughput) else flops.achieved_tflops_per_device(
            p.throughput, per_sample, p.devices)
        device = p.device if isinstance(p.device, str) else None
        peak = flops.peak(device, p.precision, p.amp_dtype, config.get("peak_tflops"))
        rows.append((per_sample, achieved, peak["tflops"], peak["dtype"], peak["source"],
                     flops.mfu(achieved, peak["tflops"])))
    points = points.copy()
    for i, column in enumerate(FLOP_COLUMNS):
        points[column] = pd.Series([r[i] for r in rows], index=points.index, dtype=object)
    return points


def _dict_or_none(value):
    return value if isinstance(value, dict) else None


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and x != x)


def find_points(root) -> list:
    """Every point.json under root; RecordError when there is no sweep there."""
    root = str(root)
    if not os.path.isdir(root):
        raise RecordError(f"no results folder at {root}")
    found = layout.point_files(root)
    if not found:
        raise RecordError(f"no sweep points under {root} (expected "
                          f"SWEEP/{layout.POINTS_DIR}/*/{layout.POINT_FILE})")
    return found


def load(path, *, max_cv: float = method.MAX_CV, max_drift: float = method.MAX_DRIFT) -> Results:
    """Every sweep point under `path` (a sweep folder or a folder of sweeps), each file
    read once. Bad record files cost their repeats (Results.corrupt lists them). `max_cv`
    and `max_drift`: the flags' thresholds (analysis/method.py)."""
    reader = _Reader(str(path), {"max_cv": max_cv, "max_drift": max_drift})
    files = find_points(path)
    for point_file in files:
        reader.point(point_file)
    reader.searches_of({layout.sweep_of(os.path.dirname(f)) for f in files})
    return reader.results()
