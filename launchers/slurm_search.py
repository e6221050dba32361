"""A search (`search=`, launchers/search.py) on Slurm: ONE allocation, each try an srun step.

    python -m launch launcher=slurm cluster=mysite model=bert_base \\
        'search={key:batch_size,start:8}'          # DLPerf's "bsz=max", per framework

`submit(base)` queues one batch job of the point's shape (nodes x gpus_per_node) whose
driver is a SearchDriver: the point's own driver (launchers/slurm_driver.py) with the
search loop in place of the repeat loop. Each try's repeats are srun steps in that same
allocation, OOM is an outcome like any other, and the tries are points of their own, as
on the local launcher, with the same ledger (SWEEP/searches/<p>.json) and so the same
report section. The job's record is SWEEP/points/<p>/slurm.json (a folder beside the
tries' that holds no point.json: only the tries are points); each try gets a copy, so
`launch status` and `launch cancel` see every try's job.

Requeue (preemption, `scontrol requeue`, the time-limit signal): the driver runs the search
again and the ledger answers every value already tried (launchers/search.py `run`); the try
that was cut short resumes at its first unrecorded repeat. The allocation is sized for the
most tries the search can take (search.max_tries), capped at the cluster's max_time_min;
a longer search goes on over requeues.
"""
import os
import time

from submitit.helpers import DelayedSubmission

from contract import paths, records
from launchers import points, sacct, search, slurm_driver, slurm_job, srun_step


SHAPE = ("nodes", "gpus_per_node", "world_size")  # the allocation's: the same for every try


def check(point: dict) -> None:
    """Refuse, with points.ConfigError, a search that cannot run in one allocation."""
    key = search.settings(point)["key"]
    if key in SHAPE:
        raise points.ConfigError(f"search key {key} changes the allocation; on Slurm a search "
                                 "runs inside one allocation (sweep it instead: -m nodes=1,2,4)")


class SearchDriver(slurm_driver.PointDriver):
    """submitit's callable for one search: the base point travels with it (it is written
    nowhere else; only its tries are points on disk)."""

    def __init__(self, base: dict):
        super().__init__(base["dir"])
        self.base = base

    def checkpoint(self, *args, **kwargs) -> DelayedSubmission:
        slurm_driver.log("the allocation nears its time limit: requeueing; the ledger keeps the tries")
        return DelayedSubmission(SearchDriver(self.base))

    def __getstate__(self):
        return {"point_dir": self.point_dir, "base": self.base}

    def run(self):
        ledger = search.run(self.base, self.start, log=slurm_driver.log)
        if ledger["stopped"]:  # a try neither ok nor oom: Slurm's own state says FAILED too
            raise RuntimeError(f"search {ledger['key']} stopped at {ledger['stopped']}")
        return ledger

    def start(self, point: dict, spec_path: str, rdir: str):
        """A try's repeat: the try's point first gets the search's job record (this job's,
        not an earlier search job's whose allocation ended in this try)."""
        rec = self.try_record(point)
        if (slurm_job.read_slurm_json(point["dir"]) or {}).get("job_id") != rec["job_id"]:
            records.write_json_atomic(os.path.join(point["dir"], paths.SLURM_FILE), rec)
        return super().start(point, spec_path, rdir)

    def try_record(self, point: dict) -> dict:
        """The search's job record (written by `submit`), named for one try. From the job's
        environment where the submitter has not written it yet (the job started first)."""
        rec = slurm_job.read_slurm_json(self.base["dir"])
        job = self.job_id
        if not rec or rec.get("job_id") != job:
            from submitit import JobEnvironment
            rec = {"schema": paths.SLURM_SCHEMA, "version": paths.SCHEMA_VERSION, "job_id": job,
                   "submitit_folder": slurm_job.submitit_folder(self.base),
                   "log": str(JobEnvironment().paths.stdout), "previous_jobs": []}
        return dict(rec, point=point["point"], search=self.base["point"])


def submit(base: dict, dry_run: bool = False) -> None:
    s = search.settings(base)
    sized = dict(base, repeats=base["repeats"] * search.max_tries(s))  # the allocation's time
    if dry_run:
        print(f"{search.describe(base)}; on Slurm one allocation, each try's repeats srun steps in it")
        print(slurm_job.sbatch_script(sized).rstrip("\n"))
        return
    slurm_job.preflight([base])
    previous = slurm_job.read_slurm_json(base["dir"])
    queued = str((previous or {}).get("job_id") or "")
    if queued and sacct.squeue_states([queued]).get(queued) in ("PENDING", "RUNNING"):
        print(f"{base['point']}: search already queued as Slurm job {queued}")  # leave it be
        return
    done = search.read_ledger(base)
    if done and done["done"] and all(done[k] == s[k] for k in ("start", "max", "tolerance")):
        print(f"{base['point']}: search {s['key']} is done (see {search.ledger_path(base)}); "
              "nothing to submit")
        return
    os.makedirs(base["dir"], exist_ok=True)
    try:
        with slurm_job.submission_environ():
            job = slurm_job.make_executor(sized).submit(SearchDriver(base))
    except Exception as exc:  # sbatch refused: say why in one line
        message = " ".join(str(exc).split())
        raise points.ConfigError(f"sbatch refused {base['point']}: {message[-400:]}") from None
    search.begin(base)  # the ledger, so that `launch status` shows the search before its first try
    records.write_json_atomic(os.path.join(base["dir"], paths.SLURM_FILE), {
        "schema": paths.SLURM_SCHEMA, "version": paths.SCHEMA_VERSION, "point": base["point"],
        "job_id": str(job.job_id), "submitit_folder": slurm_job.submitit_folder(base),
        "log": str(job.paths.stdout),
        "submitted_unix": time.time(), "time_min": srun_step.time_limit_min(sized),
        "search": base["point"],
        "previous_jobs": ([previous["job_id"]] + previous.get("previous_jobs", [])) if previous else []})
    print(f"{base['point']}: search {s['key']} queued as Slurm job {job.job_id} "
          f"(one allocation; at most {search.max_tries(s)} tries, each an srun step)")
