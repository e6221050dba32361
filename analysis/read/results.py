"""What a sweep's records say, as analysis.load returns it: `Results`, its DataFrames'
columns, and the steps kept as numpy columns until a notebook asks for their DataFrame.

A leaf of the reading side: it opens no file (analysis/read/load.py reads them) and computes
no figure (analysis/figures/points.py); notebooks import `Results` from `analysis`.
"""
import copy

import numpy as np
import pandas as pd

from analysis.figures import method
from analysis.figures.points import (CONFIG_COLUMNS, FLOP_COLUMNS, POINT_ENERGY_COLUMNS,
                                     RUN_ENERGY_COLUMNS)

# The method's figures of a point (analysis/figures/method.py): the median and its spread, the
# median's 95% interval, the steps' percentiles, straggler ratio (and the slowest rank's
# host, when past method.STRAGGLER_LIMIT, in how many ok repeats) and drift, the flags.
STAT_COLUMNS = ["ci_lo", "ci_hi", "ci_coverage", "step_p50", "step_p90", "step_p99",
                "straggler", "straggler_host", "straggler_host_repeats", "drift", "marks",
                "flag_spread", "flag_few_repeats", "flag_drift",
                "host_lag", "host_bound"]   # where a point is a GPU's (analysis/figures/host_bound.py)
POINT_COLUMNS = ["sweep", "point", *CONFIG_COLUMNS, "repeats", "mode", "throughput", "tp_min", "tp_max",
                 "tp_cv", "n_ok", "n_recorded", "status", "error", "peak_device_bytes", "device",
                 *STAT_COLUMNS, "speedup", "efficiency", "flag_baseline", "speedup_marks",
                 *FLOP_COLUMNS, *POINT_ENERGY_COLUMNS]
RUN_COLUMNS = ["sweep", "point", "repeat", "status", "error", "log_tail", "ranks_recorded",
               "throughput", "window_s", "samples", "straggler", "straggler_host", "drift",
               *RUN_ENERGY_COLUMNS]
STEP_COLUMNS = ["point", "repeat", "rank", "host", "step", "phase", "start", "end", "samples",
                "loss", "duration"]
# Rows of steps.parquet written at a time, one row group: pyarrow's own row group size
ROW_GROUP = 1024 * 1024
# A row of the step columns' `owners` (analysis/read/load.py): one per rank record, its steps'
# count last.
OWNER_FIELDS = ("point", "repeat", "rank", "host", "steps")
COMM_COLUMNS = ["sweep", "point", "repeat", "rank", "op", "bytes", "count", "dtype", "inplace",
                "iters", "time_s", "algbw_gbps", "busbw_gbps", "wrong", "imbalance"]


class Results:
    """What a sweep's records say. DataFrames for notebooks and the report:

    points        one row per sweep point, with the method's summary
    runs          one row per recorded repeat (sweep and point name it: a folder of
                  sweeps may hold same-named points)
    steps         one row per rank per step (built from numpy columns when first asked for)
    comm          one row per comm measurement (bench=comm): sweep, point, repeat, rank, op, ...

    and plain data for the report's other sections:

    searches      the search ledgers (launchers/plan/search.py), as written
    environments  one entry per rank record read: sweep, point, repeat, rank, host,
                  framework, environment, window (its timed window), profile (profile=true's
                  trace, else None), parallel (a layout's grid place and parameter counts),
                  pipeline (its bubble), moe (a mixture of experts' load and all-to-all
                  seconds, frameworks/pytorch/models/moe.py) and checkpoint (its saves and loads,
                  docs/checkpoint.md)
    manifests     (sweep, point) -> the point's point.json (its model settings, config, search)
    preflights    (sweep, point) -> its preflight.json, for points run with preflight=true
    certifications  each certification's verdict.json under the path (certify/), with its
                  `folder`
    corrupt       one entry per bad file: file, reason, newer, sweep, point, repeat
    limits        the flags' thresholds the points were flagged with: max_cv, max_drift
    """

    def __init__(self, points, runs, steps=None, root="", *, comm=None, searches=(),
                 environments=(), manifests=None, corrupt=(), step_columns=None, limits=None,
                 preflights=None, certifications=()):
        self.points, self.runs, self.root = points, runs, str(root)
        self.limits = {"max_cv": method.MAX_CV, "max_drift": method.MAX_DRIFT, **(limits or {})}
        self._steps, self._columns = steps, step_columns
        self.comm = comm if comm is not None else pd.DataFrame(columns=COMM_COLUMNS)
        self.searches, self.environments = list(searches), list(environments)
        self.manifests, self.corrupt = dict(manifests or {}), list(corrupt)
        self.preflights = dict(preflights or {})
        self.certifications = list(certifications)

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

    def runs_of(self, sweep, point) -> pd.DataFrame:
        """One point's runs: by sweep and name, since the sweeps of a folder repeat names."""
        runs = self.runs
        if not len(runs):
            return runs
        same = runs.point == point
        if "sweep" in runs:   # runs tables built by hand may lack it
            same &= runs.sweep.astype(str) == str(sweep)
        return runs[same]

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

    def _owners(self, field: str, rows=slice(None), steps: slice | None = None):
        """Each step's point code, repeat, rank or host code (`field`), from the records'
        owners rows (`rows`: some of them; their steps in reading order), or of the steps
        `steps` (a range of all of them) alone."""
        owners = self._columns["owners"][rows]
        counts = owners[:, -1]
        if steps is not None:
            ends = np.cumsum(counts)
            i, j = np.searchsorted(ends, [steps.start, steps.stop], side="right")
            j = min(j + 1, len(owners))
            owners, counts = owners[i:j], counts[i:j].copy()
            if len(counts):   # the first and last records' steps within the range
                counts[0] -= steps.start - (ends[i] - owners[0, -1])
                counts[-1] -= ends[j - 1] - steps.stop
                counts = np.maximum(counts, 0)
        dtype = np.int32 if field in ("point", "host") else np.int64
        return np.repeat(owners[:, OWNER_FIELDS.index(field)].astype(dtype), counts)

    def _step_frame(self) -> pd.DataFrame:
        c = self._columns
        if c is None:
            return pd.DataFrame(columns=STEP_COLUMNS)
        return pd.DataFrame({
            "point": pd.Categorical.from_codes(self._owners("point"), categories=c["point_names"]),
            "repeat": self._owners("repeat"), "rank": self._owners("rank"),
            "host": pd.Categorical.from_codes(self._owners("host"), categories=c["host_names"]),
            "step": c["step"], "phase": pd.Categorical.from_codes(c["phase"], categories=pd.Index(method.PHASES)),
            "start": c["start"], "end": c["end"], "samples": c["samples"], "loss": c["loss"],
            "duration": c["end"] - c["start"]}, copy=False)

    def timed_steps(self, point: str, repeats) -> pd.DataFrame:
        """The timed steps of `point`'s `repeats`: rank, duration (s) and host (categorical),
        straight from the columns (the whole steps DataFrame is not built for it)."""
        c = self._columns
        if c is None:
            s = self.steps
            s = s[(s.point == point) & (s.phase == "measure") & s.repeat.isin(list(repeats))]
            return pd.DataFrame({"rank": s["rank"].to_numpy(), "duration": s.duration.to_numpy(),
                                 "host": pd.Categorical(s.host.astype(str))})
        names, owners = c["point_names"], c["owners"]
        code = names.index(point) if point in names else -1
        rows = (owners[:, 0] == code) & np.isin(owners[:, 1], list(repeats))
        starts = np.r_[0, np.cumsum(owners[:, -1])][:-1][rows]
        parts = [slice(a, a + n) for a, n in zip(starts, owners[rows, -1])]
        runs: list = []      # the records' steps, as runs of neighbouring records
        for part in parts:
            if runs and runs[-1].stop == part.start:
                runs[-1] = slice(runs[-1].start, part.stop)
            else:
                runs.append(part)

        def joined(column):
            return (np.concatenate([column[r] for r in runs]) if len(runs) != 1 else column[runs[0]])

        keep = joined(c["phase"]) == method.PHASES.index("measure")
        duration = joined(c["end"])[keep]
        duration -= joined(c["start"])[keep]
        return pd.DataFrame({"rank": self._owners("rank", rows)[keep], "duration": duration,
                             "host": pd.Categorical.from_codes(self._owners("host", rows)[keep],
                                                               categories=c["host_names"])},
                            copy=False)

    def steps_table(self, steps: slice | None = None):
        """The steps as a pyarrow Table, straight from the columns (no DataFrame); `steps`:
        a range of them only."""
        import pyarrow as pa

        c = self._columns
        if c is None:
            return pa.Table.from_pandas(self.steps, preserve_index=False)
        steps = slice(0, self.step_count()) if steps is None else steps

        def dictionary(codes, names):
            return pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(names, pa.string()))

        def owners(field):
            return self._owners(field, steps=steps)

        start, end = c["start"][steps], c["end"][steps]
        return pa.table({
            "point": dictionary(owners("point"), c["point_names"]),
            "repeat": owners("repeat"), "rank": owners("rank"),
            "host": dictionary(owners("host"), c["host_names"]), "step": c["step"][steps],
            "phase": dictionary(c["phase"][steps], list(method.PHASES)), "start": start, "end": end,
            "samples": c["samples"][steps], "loss": c["loss"][steps], "duration": end - start})

    def write_steps(self, path) -> None:
        """steps.parquet (one row per rank per step; pandas.read_parquet reads it back),
        written a row group at a time: only one group's columns are ever made whole."""
        import pyarrow.parquet as pq

        options = {"compression": "zstd",
                   "use_dictionary": ["point", "repeat", "rank", "host", "phase", "samples"]}
        n = self.step_count()
        if self._columns is None or not n:
            pq.write_table(self.steps_table(), str(path), **options)
            return
        first = self.steps_table(slice(0, min(n, ROW_GROUP)))
        with pq.ParquetWriter(str(path), first.schema, **options) as writer:
            writer.write_table(first)
            del first
            for a in range(ROW_GROUP, n, ROW_GROUP):
                writer.write_table(self.steps_table(slice(a, min(n, a + ROW_GROUP))))
