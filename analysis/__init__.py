"""Analysis of benchmark records: `analysis.load(path)` for notebooks (the one reader of a
sweep's files, or of its archive), `analysis.stored()` for the results store's points,
`python -m analysis report PATH` for the terminal."""
import sys

from analysis.read import ahead

# `python -m analysis report PATH`: PATH's records start being read now, while the rest
# (pandas, pyarrow: half a second) imports (analysis/read/ahead.py)
ahead.start_early(getattr(sys, "orig_argv", ()))

from analysis.read.load import CorruptFile, RecordError, Results, load  # noqa: E402
from analysis.read.merge import SeveralSweeps  # noqa: E402

__all__ = ["load", "stored", "Results", "RecordError", "CorruptFile", "SeveralSweeps"]


def stored(where: dict | None = None, since=None, sweep=None, store=None):
    """Every point of the results store (analysis/store/) as a DataFrame, one row each with
    its sweep (sweep, sweep_key, sweep_path, sweep_archive, sweep_created) and what it ran
    and measured; `where` {column: value}, `since` a date and `sweep` select as
    `python -m analysis history` does. `store`: a path or URL (default: DLBENCH_STORE, ...)."""
    from analysis.store import commands, history
    frame = commands.open_store(store, False).points()
    frame = frame.assign(created=frame.sweep_created)
    return history.select(frame, {k: str(v) for k, v in (where or {}).items()}, since, sweep)
