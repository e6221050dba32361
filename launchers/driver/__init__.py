"""The driver: what runs in a point's allocation, whichever backend gave it (here, or the
Slurm batch job's first node), handed the backend's launcher object of that allocation.

    preflight.py  preflight=true: the health step before the first repeat, the sick left out
    repeats.py    the repeat loop: every repeat not yet recorded, each with fresh ranks
    run_spec.py   what one repeat's ranks read (spec.json), from the point
    search.py     search=: the search loop in place of the repeat loop, a try at a time
    ledger.py     a search's ledger, its memory in the sweep folder

It imports no part of the planner (launchers/plan/): the point it runs was decided there,
checked and written; the driver reads it (launchers/sweepdir.py) and runs it.
"""
