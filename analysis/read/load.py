"""A sweep's files -> `Results` (analysis/read/results.py): the one reader.

This module is the only code of the analysis that walks a sweep's files, and it opens
each once (one file at a time: analysis/read/record_file.py); every other module of the
analysis is a function of the `Results` it returns. The layout and schema names are
contract/paths.py's; the figures of each repeat and point are
analysis/figures/points.py's.

Works on partial sweeps: a point with fewer recorded repeats than asked is `partial` or
`missing`, never dropped. A certification's verdict.json (certify/) is read beside its sweeps
(`Results.certifications`); a certification whose health gate failed has no sweep, only that.

Tolerant of bad files: a record file that is torn (truncated JSON), garbage, of a foreign
schema, malformed, or of a schema version newer than this analysis costs only its repeat.
The repeat is `corrupt`, with an error naming the file and the reason, the file is listed
in `Results.corrupt`, and everything else is loaded as usual; a point whose recorded
repeats are all corrupt is `corrupt` (contract/statuses.py). A bad point.json
costs its point (listed, left out of the tables), a bad search ledger its search. Only
input with no sweep in it at all is a RecordError.

Fast at scale: steps are kept as numpy columns (never a dict per step), each record's
copied into columns sized once from the files' bytes as it is read (no record's own arrays
outlive it), each step's point, repeat, rank and host derived from a row per record when
asked; the steps DataFrame is built when first asked for (`Results.steps`); the report
writes them as Parquet from the columns. With `ahead_ok` (the report's command) a second
process reads part of the rank records (analysis/read/ahead.py). Memory grows linearly with
the number of steps: about 41 bytes a step of columns (benchmarks/analysis_scale.md).
"""
import contextlib
import gc
import os

import numpy as np
import pandas as pd

from analysis.figures import host_bound, method
from analysis.figures.points import (FLOP_COLUMNS, RUN_ENERGY_COLUMNS, add_energy_per_token,
                                     add_flops, add_speedup, repeat_figures, summarize_point)
from analysis.read import ahead as read_ahead
from analysis.read import archive, record_file
from analysis.read import merge as merge_rule
from analysis.read.record_file import CorruptFile, RecordError
from analysis.read.results import COMM_COLUMNS, POINT_COLUMNS, RUN_COLUMNS, Results
from contract import paths, secrets, statuses

__all__ = ["load", "find_points", "Results", "RecordError", "CorruptFile"]


class _Reader:
    """Accumulates what the records say, point by point; `results()` assembles it."""

    def __init__(self, root: str, limits: dict | None = None, damaged: dict | None = None,
                 steps_at_most: int = 0, ahead=None):
        self.root = root
        self.limits = dict(limits or {})   # the flags' thresholds: max_cv, max_drift
        self.damaged = damaged or {}       # an archive's files that failed its checks: path -> why
        self.point_rows: list = []
        self.run_rows: list = []
        self.corrupt: list = []
        self.comm: list = []
        self.environments: list = []
        self.manifests: dict = {}
        self.searches: list = []
        self.preflights: dict = {}  # (sweep, point) -> its preflight.json (preflight=true)
        self.certifications: list = []  # each certification's verdict.json (certify/)
        self.steps = _StepBuffers(steps_at_most)
        self.owners: list = []      # per rank record kept: (point code, repeat, rank, host code, steps)
        self.point_code: dict = {}
        self.host_code: dict = {}
        self.ahead = ahead    # read_ahead.Ahead: a second process reading the rank records

    def bad(self, c: CorruptFile, sweep=None, point=None, repeat=None) -> None:
        self.corrupt.append({"file": c.path, "reason": c.reason, "newer": c.newer,
                             "sweep": sweep, "point": point, "repeat": repeat})

    def point(self, point_file: str) -> None:
        pdir = os.path.dirname(point_file)
        sweep = paths.sweep_of(pdir)
        try:
            self.check(point_file)
            point, row = record_file.point_record(point_file, sweep)
        except CorruptFile as c:
            self.bad(c, sweep, os.path.basename(pdir))
            return
        known = secrets.found(point)   # a sweep written before the secret rule (contract/secrets.py)
        if known:
            point = secrets.masked(point, values=known)
        self.manifests[(sweep, row["point"])] = point
        try:
            names = sorted(os.listdir(pdir))
        except OSError:
            names = []
        runs, durations = [], []
        for name in names:
            m = paths.REPEAT_RE.match(name)  # set-aside attempts (repeat-NN.interrupted-T): never
            if m and os.path.isdir(os.path.join(pdir, name)):
                run, timed = self.repeat(os.path.join(pdir, name), row, int(m.group(1)))
                if run["error"] or run["log_tail"]:   # text the report shows and writes
                    run.update(secrets.masked({k: run[k] for k in ("error", "log_tail")}, values=known))
                runs.append(run)
                if timed is not None:
                    durations.append(timed)
        pre = self.preflight(pdir, sweep, row["point"]) if paths.PREFLIGHT_FILE in names else None
        self.run_rows += runs
        self.point_rows.append(summarize_point(row, runs, durations, preflight=pre, **self.limits))

    def preflight(self, pdir: str, sweep: str, point: str):
        """The point's preflight record (docs/health.md), or None; a bad one costs only itself."""
        try:
            self.check(os.path.join(pdir, paths.PREFLIGHT_FILE))
            pre = record_file.read_record(os.path.join(pdir, paths.PREFLIGHT_FILE), paths.PREFLIGHT_SCHEMA)
        except CorruptFile as c:
            self.bad(c, sweep, point)
            return None
        self.preflights[(sweep, point)] = pre
        return pre

    def ranks(self, rdir: str, names: list, world: int):
        """(rank -> its record without steps, rank -> its step columns, the bad files) of
        one repeat folder; each good record's steps join the step columns as it is read
        (its columns here are views of them)."""
        ranks, cols, bad = {}, {}, []
        read = self.ahead.take if self.ahead is not None else record_file.rank_record
        for fname in names:
            if not paths.RANK_RECORD_RE.match(fname):
                continue
            path = os.path.join(rdir, fname)
            try:
                self.check(path)
                slim, c = read(path)
                if not 0 <= slim["rank"] < world or slim["rank"] in ranks:
                    raise CorruptFile(path, f"malformed: rank {slim['rank']} "
                                            + ("twice" if slim["rank"] in ranks else
                                               f"in a world of {world}"))
            except CorruptFile as exc:
                bad.append(exc)
                continue
            ranks[slim["rank"]], cols[slim["rank"]] = slim, self.steps.append(c)
        return ranks, cols, bad

    def repeat(self, rdir: str, prow: dict, repeat: int):
        """(the run's row, the durations of its ranks' timed steps: a numpy array for an ok
        training repeat, else None)."""
        name, sweep, world = prow["point"], prow["sweep"], prow["devices"]
        try:
            names, bad = sorted(os.listdir(rdir)), []
        except OSError as exc:
            names, bad = [], [CorruptFile(rdir, f"cannot list it: {exc.strerror or exc}")]
        ranks, cols, bad_ranks = self.ranks(rdir, names, world)
        bad += bad_ranks
        if self.damaged:   # any other damaged file of the repeat (run.json, a log) costs it too
            bad += [CorruptFile(p, why) for p, why in sorted(self.damaged.items())
                    if p.startswith(rdir + os.sep) and not paths.RANK_RECORD_RE.match(os.path.basename(p))]
        comm = [self.keep_rank(sweep, name, repeat, ranks[r], cols[r]) for r in ranks]
        run, run_path = None, os.path.join(rdir, paths.RUN_FILE)
        if paths.RUN_FILE in names:
            try:
                run = None if run_path in self.damaged else record_file.run_record(run_path)
            except CorruptFile as exc:
                bad.append(exc)
        row = {"sweep": sweep, "point": name, "repeat": repeat, "status": None, "error": None,
               "log_tail": None, "ranks_recorded": len(ranks), "throughput": None,
               "window_s": None, "samples": None, "straggler": None, "straggler_host": None,
               "drift": None, **dict.fromkeys(RUN_ENERGY_COLUMNS)}
        timed = None
        if bad:
            pass  # corrupt: below
        elif run is not None:
            row.update(status=run["status"], error=run.get("error"), log_tail=run.get("log_tail"))
        elif len(ranks) == world:  # the driver died after its ranks finished
            row["status"], row["error"] = statuses.run_status(ranks, world)
        else:
            row.update(status="incomplete", error=f"repeat not finished (no {paths.RUN_FILE})")
        if row["status"] == "ok" and prow["bench"] == "train":  # comm: analysis/figures/comm.py
            try:
                if len(ranks) != world:
                    raise ValueError(f"it says ok, but {world - len(ranks)} of {world} rank "
                                     "records are missing")
                figs, timed = repeat_figures(ranks, cols)
                row.update(figs)
            except record_file.MALFORMED as exc:  # an ok repeat whose records give no throughput
                bad.append(CorruptFile(run_path if run is not None else rdir,
                                       f"inconsistent with its rank records: {record_file.why(exc)}"))
        if bad:
            for c in bad:
                self.bad(c, sweep, name, repeat)
            shown = "; ".join(c.message for c in bad[:3])
            row.update(status="corrupt", log_tail=None,   # its figures were never computed
                       error=shown + (f"; and {len(bad) - 3} more" if len(bad) > 3 else ""))
            timed = None
        else:   # comm results count unless their repeat is corrupt
            self.comm += [c for rank_comm in comm for c in rank_comm]
        row.update(_from_ranks(ranks))
        return row, timed

    def keep_rank(self, sweep, point, repeat, rec, cols) -> list:
        """What one good rank record contributes: its steps and environment; returns its
        comm results, which count unless its repeat is corrupt."""
        pcode = self.point_code.setdefault(point, len(self.point_code))
        hcode = self.host_code.setdefault(rec["host"], len(self.host_code))
        self.owners.append((pcode, repeat, rec["rank"], hcode, len(cols["step"])))
        self.environments.append({"sweep": sweep, "point": point, "repeat": repeat,
                                  "rank": rec["rank"], "host": rec["host"],
                                  "framework": rec["framework"],
                                  "environment": rec.get("environment") or {},
                                  "container": _dict_or_none(rec.get("container")),  # its image
                                  "window": _dict_or_none(rec.get("window")),   # the timed window
                                  "profile": _dict_or_none(rec.get("profile")),  # profile=true's trace
                                  # a layout's grid place and counts, a pipeline's bubble,
                                  # a mixture of experts' load and all-to-all seconds
                                  "parallel": _dict_or_none(rec.get("parallel")),
                                  "pipeline": _dict_or_none(rec.get("pipeline")),
                                  "moe": _dict_or_none(rec.get("moe")),
                                  # bench=checkpoint's or checkpoint.every's
                                  # (analysis/figures/checkpoint.py)
                                  "checkpoint": _dict_or_none(rec.get("checkpoint")),
                                  # the network NCCL chose (contract/nccl_net.py), NCCL points
                                  "nccl": _dict_or_none(rec.get("nccl"))})
        return [{**c, "sweep": sweep, "point": point, "repeat": repeat, "rank": rec["rank"]}
                for c in rec.get("comm") or ()]

    def searches_of(self, sweeps) -> None:
        for path in paths.search_files(sweeps):
            try:
                self.check(path)
                self.searches.append(record_file.search_ledger(path))
            except CorruptFile as c:
                self.bad(c, sweep=os.path.dirname(os.path.dirname(path)))

    def certifications_of(self, root) -> None:
        """Each certification's verdict.json under root (certify/; a bad one costs only itself),
        with `folder`: the certification's."""
        for path in paths.certification_files(root):
            try:
                self.check(path)
                verdict = record_file.read_record(path, paths.CERTIFICATION_SCHEMA)
            except CorruptFile as c:
                self.bad(c)
                continue
            self.certifications.append(dict(verdict, folder=os.path.dirname(path)))

    def check(self, path: str) -> None:
        """CorruptFile where `path` is one of an archive's damaged files."""
        if path in self.damaged:
            raise CorruptFile(path, self.damaged[path])

    def step_columns(self):
        """The steps of every rank record kept, as columns in reading order, and `owners`: a
        row per record (point code, repeat, rank, host code, its number of steps) from which
        Results derives each step's point, repeat, rank and host when asked."""
        if not self.owners:
            return None
        return {**self.steps.columns(), "owners": np.array(self.owners, dtype=np.int64).reshape(-1, 5),
                "point_names": list(self.point_code), "host_names": list(self.host_code)}

    def results(self) -> Results:
        added = {"speedup", "efficiency", "flag_baseline", "speedup_marks", *FLOP_COLUMNS,
                 "energy_per_token_j"}
        points = pd.DataFrame(self.point_rows) if self.point_rows else pd.DataFrame(
            columns=[c for c in POINT_COLUMNS if c not in added])
        runs = pd.DataFrame(self.run_rows) if self.run_rows else pd.DataFrame(columns=RUN_COLUMNS)
        comm = pd.DataFrame(self.comm, columns=COMM_COLUMNS) if self.comm else None
        points = host_bound.where_judged(
            add_energy_per_token(add_flops(add_speedup(points), self.manifests), self.manifests))
        points = points[[c for c in POINT_COLUMNS if c in points]
                        + [c for c in points if c not in POINT_COLUMNS]]
        return Results(points, runs, root=self.root, comm=comm,
                       searches=self.searches, environments=self.environments,
                       manifests=self.manifests, corrupt=self.corrupt,
                       step_columns=self.step_columns(), limits=self.limits,
                       preflights=self.preflights, certifications=self.certifications)


def _from_ranks(ranks: dict) -> dict:
    """What a repeat's row takes from any of its rank records: versions, device, hosts and
    the largest rank's peaks of memory (device, host RSS, live tensors:
    analysis/figures/metrics.py)."""
    any_rank = next(iter(ranks.values()), None)
    if not any_rank:
        return {}
    tensors = _largest(ranks, "peak_tensor_bytes")
    return {"framework_version": any_rank["framework"].get("version"),
            "device": (any_rank.get("environment") or {}).get("device"),
            "hosts": ",".join(sorted({r["host"] for r in ranks.values()})),
            "peak_device_bytes": _largest(ranks, "peak_device_bytes"),
            "peak_host_bytes": _largest(ranks, "peak_host_bytes") or 0,
            # a column of runs.csv only where a rank counted its tensors (PyTorch's layouts)
            **({"peak_tensor_bytes": tensors} if tensors is not None else {})}


def _largest(ranks: dict, key: str):
    """The largest of the ranks' `memory[key]`, or None where none recorded it."""
    values = [r["memory"][key] for r in ranks.values() if r["memory"].get(key) is not None]
    return max(values) if values else None


def find_points(root) -> list:
    """Every point.json under root; RecordError when there is no sweep there."""
    root = str(root)
    if not os.path.isdir(root):
        raise RecordError(f"no results folder at {root}")
    found = paths.point_files(root)
    if not found and not paths.certification_files(root):   # a certification whose gate failed
        raise RecordError(f"no sweep points under {root} (expected "
                          f"SWEEP/{paths.POINTS_DIR}/*/{paths.POINT_FILE})")
    return found


def load(path, *, merge: bool = False, max_cv: float = method.MAX_CV,
         max_drift: float = method.MAX_DRIFT, ahead_ok: bool = False) -> Results:
    """Every sweep point under `path` (a sweep folder, a certification's, or a sweep's archive:
    analysis/read/archive.py), each file read once. A folder of several sweeps is refused
    (SeveralSweeps, naming them: analysis/read/merge.py) unless `merge`: then their points are read together.
    Bad record files cost their repeats
    (Results.corrupt lists them). `max_cv` and `max_drift`: the flags' thresholds
    (analysis/figures/method.py). `ahead_ok`: a second process may read part of the rank records,
    forked for it (analysis/read/ahead.py; the report's command asks for it, a notebook's
    kernel had better not fork)."""
    if archive.is_archive(path):
        with opened(path, merge=merge, max_cv=max_cv, max_drift=max_drift,
                    ahead_ok=ahead_ok) as (results, _):
            return results
    return _load(path, {"max_cv": max_cv, "max_drift": max_drift}, ahead_ok=ahead_ok, merge=merge)


@contextlib.contextmanager
def opened(path, ahead_ok: bool = False, merge: bool = False, **limits):
    """(Results, {sweep as shown: the folder its files are in}) of a sweep folder, or of an
    archive unpacked for as long as the block runs (its damaged files cost their repeats;
    its paths shown as ARCHIVE/...)."""
    if not archive.is_archive(path):
        yield load(path, ahead_ok=ahead_ok, merge=merge, **limits), {}
        return
    with archive.unpacked(path) as (folder, damaged):
        try:
            results = archive.relabel(_load(folder, limits, damaged, ahead_ok, merge), folder, str(path))
        except merge_rule.SeveralSweeps as exc:
            raise merge_rule.SeveralSweeps(str(path), [u.replace(folder, str(path), 1) for u in exc.units],
                                           exc.how) from None
        except RecordError as exc:   # named as the archive, not the folder it was unpacked to
            raise RecordError(str(exc).replace(folder, str(path))) from None
        yield results, {s: s.replace(str(path), folder, 1) for s in results.points.sweep.unique()}


def _load(path, limits: dict, damaged: dict | None = None, ahead_ok: bool = False,
          merge: bool = False) -> Results:
    files = find_points(path)
    merge_rule.check(path, files, merge)
    records, size = read_ahead.rank_records(files)
    ahead = read_ahead.reader(records, size) if ahead_ok else None
    reader = _Reader(str(path), limits, damaged, ahead=ahead,
                     steps_at_most=size // record_file.MIN_STEP_BYTES + len(records))
    try:
        with _collector_paused():
            for point_file in files:
                reader.point(point_file)
            reader.searches_of({paths.sweep_of(os.path.dirname(f)) for f in files})
            reader.certifications_of(path)
            named = {c["file"] for c in reader.corrupt}
            for p, why in sorted(reader.damaged.items()):   # read by no one (slurm.json, a log): named
                if p not in named:
                    reader.bad(CorruptFile(p, why))
            return reader.results()
    finally:
        if ahead is not None:
            ahead.close()


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off while records are parsed: JSON makes no cycles, and
    its passes over each record's fresh dicts were a tenth of the parse at a million steps
    (benchmarks/analysis_scale.md). Turned back on as it was found, however load ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _StepBuffers:
    """The steps of the rank records read, as columns in reading order: arrays sized once for
    the most steps the files' bytes can hold (pages never written cost no memory), each
    record's steps copied in as it is read, so that no record's own arrays outlive it."""

    def __init__(self, capacity: int):
        self.n = 0
        self.cols = {k: np.empty(max(capacity, 0), dtype) for k, dtype in record_file.STEP_DTYPES.items()}

    def append(self, cols: dict) -> dict:
        """Copies one record's step columns in; returns views of them."""
        m = len(cols["step"])
        if self.n + m > len(self.cols["step"]):   # more than the bound said: grow (not seen)
            for k, old in self.cols.items():
                self.cols[k] = np.empty(2 * (self.n + m), old.dtype)
                self.cols[k][:self.n] = old[:self.n]
        part = slice(self.n, self.n + m)
        for k, buf in self.cols.items():
            buf[part] = cols[k]
        self.n += m
        return {k: buf[part] for k, buf in self.cols.items()}

    def columns(self) -> dict:
        return {k: buf[:self.n] for k, buf in self.cols.items()}


def _dict_or_none(value):
    return value if isinstance(value, dict) else None
