"""Analysis of benchmark records: `analysis.load(path)` for notebooks (the one reader of a
sweep's files), `python -m analysis report PATH` for the terminal."""
import sys

from analysis import read_ahead

# `python -m analysis report PATH`: PATH's records start being read now, while the rest
# (pandas, pyarrow: half a second) imports (analysis/read_ahead.py)
read_ahead.start_early(getattr(sys, "orig_argv", ()))

from analysis.load import CorruptFile, RecordError, Results, load  # noqa: E402

__all__ = ["load", "Results", "RecordError", "CorruptFile"]
