"""Analysis of benchmark records: `analysis.load(path)` for notebooks,
`python -m analysis report PATH` for the terminal."""
from analysis.load import RecordError, Results, load

__all__ = ["load", "Results", "RecordError"]
