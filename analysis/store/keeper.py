"""A report adds its sweep to the results store (analysis/store.py), beside its tables.

`Keeper(store)` starts one worker process before the records are read (as the plots' does:
analysis/plot_process.py): it imports SQLAlchemy (a quarter of a second) while the report
parses. `submit(results, folders, archive)` computes what the store keeps of the sweep
(analysis/store_rows.py: a row per point, small) and hands it over; the worker adds it in
one transaction while the report prints and writes, and asks accounting (sacct) for the
states of the sweep's Slurm jobs, where there are any. `result()` says what happened in one
line: the sweep added, unchanged, or why the store was not written (the report's own files
are written all the same). Where no second process can be had, the same is done here.
"""
import concurrent.futures

from analysis import store_place, store_rows
from analysis.plot_process import second_process

SACCT_TIMEOUT_S = 10   # at the report's end: `store refresh` asks again, with longer


def _warm() -> None:
    from analysis import store  # noqa: F401  (SQLAlchemy's import, beside the parse)


def _add(where: str, made: list) -> str:
    from analysis import store
    st = store.Store(where)
    lines = st.add(made)
    if any(r["jobs"] for s in made for r in s["rows"]):
        lines.append(store.refresh(st, SACCT_TIMEOUT_S, unsettled_only=True))
    return f"store {st.name}: " + "; ".join(lines)


class Keeper:
    def __init__(self, explicit=None):
        self.explicit, self._pool, self._job, self._inline = explicit, None, None, None
        if store_place.configured(explicit) is not None:   # off: the site file cannot turn it on
            self._pool = second_process(_warm)

    def submit(self, results, folders=None, archive=None) -> None:
        """What the store keeps of `results` (folders: analysis.load.opened's), handed over."""
        where = store_place.configured(self.explicit, store_place.site_setting(results))
        if where is None:
            return
        try:
            made = store_rows.sweeps(results, folders)
        except Exception as exc:   # noqa: BLE001 (the report goes on, and says so)
            self._inline = f"cannot make its rows: {type(exc).__name__}: {exc}"
            return
        for m in made:
            m["archive"] = archive
        self._inline = (where, made)
        if self._pool is not None:
            try:
                self._job = self._pool.submit(_add, where, made)
            except RuntimeError:   # the worker died while importing
                self._job = None

    def result(self):
        """(line, ok): what happened to the store, or (None, True) when it is off."""
        if self._inline is None:
            return None, True
        try:
            if isinstance(self._inline, str):
                raise store_place.StoreError(self._inline)
            if self._job is not None:
                try:
                    return self._job.result(), True
                except concurrent.futures.process.BrokenProcessPool:
                    pass   # the worker died: here, then
            return _add(*self._inline), True
        except Exception as exc:   # noqa: BLE001  the report's files are written all the same
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return f"the results store was not written: {text}", False
        finally:
            self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
