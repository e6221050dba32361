"""Analysis of benchmark records: `analysis.load(path)` for notebooks (the one reader of a
sweep's files), `python -m analysis report PATH` for the terminal."""
from analysis.load import CorruptFile, RecordError, Results, load

__all__ = ["load", "Results", "RecordError", "CorruptFile"]
