"""A report adds its sweep to the results store (analysis/store/database.py), beside its tables.

`Keeper(store)` starts one worker process before the records are read (analysis/
second_process.py, as the plots' does): it imports SQLAlchemy (a quarter of a second) while the report
parses. `submit(results, folders, archive)` computes what the store keeps of the sweep
(analysis/store/rows.py: a row per point, small; a certification's row where the path holds
one) and hands it over; the worker adds it in
one transaction while the report prints and writes, and asks accounting (sacct) for the
states of the sweep's Slurm jobs, where there are any. `result()` says what happened in one
line: the sweep added, unchanged, or why the store was not written (the report's own files
are written all the same). Where no second process can be had, the same is done here.
"""
from collections.abc import Sequence

from analysis.read.results import Results
from analysis.second_process import Job, SecondProcess
from analysis.store import place as store_place
from analysis.store import rows as store_rows

SACCT_TIMEOUT_S = 10   # at the report's end: `store refresh` asks again, with longer


def _warm() -> None:
    from analysis.store import database as store  # noqa: F401  (SQLAlchemy's import, beside the parse)


def _add(where: str, made: list[store_rows.Row], certified: Sequence[store_rows.Row] = ()) -> str:
    from analysis.store import database as store
    st = store.Store(where)
    lines = st.add(made, certified)
    if any(r["jobs"] for s in made for r in s["rows"]):
        lines.append(store.refresh(st, SACCT_TIMEOUT_S, unsettled_only=True))
    return f"store {st.name}: " + "; ".join(lines)


class Keeper:
    def __init__(self, explicit: str | None = None) -> None:
        self.explicit = explicit
        self._job: Job | None = None
        self._error: str | None = None
        # no process where the store is off (the site file cannot turn it on)
        self._worker = SecondProcess(_warm, fork=store_place.configured(explicit) is not None)

    def submit(self, results: Results, folders: store_rows.Folders | None = None,
               archive: str | None = None) -> None:
        """What the store keeps of `results` (folders: analysis/read/load.py opened's), handed over."""
        where = store_place.configured(self.explicit, store_place.site_setting(results))
        if where is None:
            return
        try:
            made = store_rows.sweeps(results, folders)
            certified = store_rows.certifications(results, folders)
        except Exception as exc:   # noqa: BLE001 (the report goes on, and says so)
            self._error = f"cannot make its rows: {type(exc).__name__}: {exc}"
            return
        for m in made + certified:
            m["archive"] = archive
        self._job = self._worker.submit(_add, where, made, certified)

    def result(self) -> tuple[str | None, bool]:
        """(line, ok): what happened to the store, or (None, True) when it is off."""
        job, error = self._job, self._error
        if job is None and error is None:
            return None, True
        try:
            if error is not None or job is None:   # job None: error says why
                raise store_place.StoreError(error)
            line: str = job.result()   # _add's
            return line, True
        except Exception as exc:   # noqa: BLE001  the report's files are written all the same
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return f"the results store was not written: {text}", False
        finally:
            self.close()

    def close(self) -> None:
        self._worker.close()
