"""One record file, read and checked: a point.json, a rank record, a run.json or a search
ledger (their schemas: contract/paths.py, docs/contract.md).

A file that cannot be used is a CorruptFile that says why (torn, garbage, of a foreign
schema, malformed, or of a newer schema version than this analysis): analysis/read/load.py
charges it to its repeat (or point, or search) alone. RecordError is the other kind: input
with no sweep in it at all, or a report that cannot be written.

Fast at scale: orjson parses where it is installed, and a rank record's steps become numpy
columns, one pass per field (never a dict per step).
"""
import operator

import numpy as np

from analysis.figures.method import PHASES
from contract import paths, values

try:
    from orjson import loads as _loads
except ImportError:  # the standard library's parser: the same results, slower
    from json import loads as _loads  # type: ignore[assignment]  # json's signature, orjson's differs

PHASE_CODE = {p: i for i, p in enumerate(PHASES)}   # a step's phase in the step columns
# Steps are read column by column: one pass per field, straight into a numpy array.
STEP_DTYPES = {"step": np.int64, "phase": np.int8, "start": np.float64, "end": np.float64,
               "samples": np.int64, "loss": np.float64}
_GET = {k: operator.itemgetter(k) for k in STEP_DTYPES}
_NUMERIC = tuple((k, _GET[k], STEP_DTYPES[k]) for k in ("step", "start", "end", "samples"))
# The fewest bytes a step of a rank record takes in JSON, its comma included:
# {"step":0,"phase":"warmup","start":0,"end":0,"samples":0,"loss":0}, (a bound on the steps
# a file can hold)
MIN_STEP_BYTES = 66
# What a malformed record (valid JSON of the right schema, wrong inside) raises when read.
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)
NUMBER = (int, float)


class RecordError(ValueError):
    """Input the analysis cannot work with at all: no sweep there, a report folder it cannot
    write, a bad reference file. (A bad record file costs only its repeat: CorruptFile.)"""

    def _render_traceback_(self) -> list:
        """IPython's hook: in a notebook, one line, as the commands say it (bad input, no bug)."""
        return [f"{type(self).__name__}: {self}"]


class CorruptFile(Exception):
    """A record file that cannot be used: torn, garbage, of a foreign schema, malformed,
    or of a newer schema version than this analysis knows (`newer`)."""

    def __init__(self, path, reason: str, newer: bool = False):
        self.path, self.reason, self.newer = str(path), reason, newer
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{'record' if self.newer else 'corrupt record'} file {self.path}: {self.reason}"


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
    if not values.is_integer(version) or version < 1:
        raise CorruptFile(path, f"not a {schema} record (version {version!r})")
    if version > paths.SCHEMA_VERSION:
        raise CorruptFile(path, f"{schema} version {version} is newer than this analysis "
                                f"(knows {paths.SCHEMA_VERSION})", newer=True)
    return obj


def _field(d: dict, key: str, kind, optional: bool = False):
    """d[key], checked to be of `kind` (None allowed when optional); TypeError/KeyError else."""
    value = d[key] if not optional else d.get(key)
    if value is None and optional:
        return None
    if not (values.is_integer(value) if kind is int else isinstance(value, kind)):
        raise TypeError(f"field {key!r} is {value!r}")
    return value


def why(exc: BaseException) -> str:
    """What a malformed record's KeyError, TypeError or ValueError says, in words."""
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r} field" if exc.args else "a field is missing"
    return str(exc) or type(exc).__name__


def _checked(path, schema: str, check):
    """read_record, then check(record): its result, or CorruptFile when malformed."""
    obj = read_record(path, schema)
    try:
        return check(obj)
    except MALFORMED as exc:
        raise CorruptFile(path, f"malformed: {why(exc)}") from None


def point_record(path, sweep: str):
    """(the point.json, its points table's row), or CorruptFile."""
    return _checked(path, paths.POINT_SCHEMA, lambda p: (p, point_row(p, sweep)))


def rank_record(path):
    """(a rank record without its steps, its steps as numpy columns), or CorruptFile."""
    return _checked(path, paths.RANK_SCHEMA, rank_columns)


def _run(run: dict) -> dict:
    _field(run, "status", str)
    _field(run, "error", str, optional=True)
    _field(run, "log_tail", dict, optional=True)
    return run


def run_record(path) -> dict:
    """A repeat's run.json, checked, or CorruptFile."""
    return _checked(path, paths.RUN_SCHEMA, _run)


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
           "mode": point.get("mode")}  # the mode that ran: eager, graph, jit, xla, ... (contract/modes.py)
    if row["devices"] < 1:
        raise ValueError(f"world_size {row['devices']}")
    every = ((point.get("config") or {}).get("checkpoint") or {}).get("every")
    if every:   # training with checkpoints: another configuration (docs/checkpoint.md)
        row["checkpoint"] = f"every {every} {point['config']['checkpoint'].get('mode', 'sync')}"
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
    for key in ("peak_device_bytes", "peak_host_bytes", "peak_tensor_bytes"):
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
    cols["phase"] = np.fromiter(map(PHASE_CODE.__getitem__, map(_GET["phase"], steps)), np.int8, n)
    try:
        cols["loss"] = np.fromiter(map(_GET["loss"], steps), np.float64, n)
    except TypeError:  # a step whose loss was never read (null): NaN
        cols["loss"] = np.array([s["loss"] for s in steps], np.float64)
    slim = {k: v for k, v in rec.items() if k != "steps"}
    if n and "enqueued" in steps[-1]:   # beside a device's step ends, the host's (docs/anatomy.md)
        slim["enqueued"] = np.array([s.get("enqueued") for s in steps], np.float64)
    return slim, cols


def _ledger(ledger: dict) -> dict:
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
    return ledger


def search_ledger(path) -> dict:
    """A search ledger (launchers/plan/search.py), checked, or CorruptFile."""
    return _checked(path, paths.SEARCH_SCHEMA, _ledger)
