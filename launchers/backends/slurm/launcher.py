"""The Slurm launcher: one allocation per sweep point, submitted with submitit (docs/slurm.md).

    python -m launch -m framework=pytorch nodes=1,2,4 gpus_per_node=8 launcher=slurm cluster=mysite

On the submitting host, `submit(points)` writes the points and submits ONE batch job per
point (nodes x gpus_per_node tasks, the cluster config's partition, account, GPUs, ...), the
points whose sbatch options agree as one job array (one sbatch call, submitit's batch), and
returns: submission does not block. Each point is still its own array task: its own job id
(`123_4`), driver, log, requeue and cancel. The job id goes to SWEEP/points/<point>/slurm.json
(launchers/backends/slurm/job.py builds and submits every job); `python -m launch status SWEEP`
reads it. `dry_run=true` prints what would run (preview.py) and submits nothing.

In the allocation, the batch job runs a driver once, on the first node, in the suite's own
Python (submitit with use_srun=False): `PointDriver`, `SearchDriver` or `HealthDriver`
below, each with a SlurmLauncher of that allocation (allocation.py). Its `start_repeat` runs
each repeat as one `srun` step (srun.py), watched and stopped by the step runner
(launchers/backends/step.py, step_watch.SrunRanks):
- its ranks end: run.json from their records (launchers/driver/repeats.py);
- a rank ends badly: the others get launcher.failure_grace_s, then the step gets SIGTERM,
  then SIGKILL; run.json names the first cause and the ranks that left no record
  (docs/slurm.md, "How a repeat ends on Slurm");
- it passes timeout_s: the step is stopped, run.json says `timeout`; srun's own --time
  backstop ending it says the same;
- the allocation ends under it: NO run.json (allocation.py, AllocationEnding);
- it lost ranks without any exit status: their nodes are probed before the next step
  (allocation.py, leave_lost_nodes).

A search (`search=`, launchers/driver/search.py) is ONE allocation, each try's repeats srun
steps in it: the allocation is sized for the most tries the search can take, and the tries
are points of their own with the search's job record. Requeue (preemption, `scontrol
requeue`, the time-limit signal): the drivers are submitit Checkpointables; a requeued job
runs its driver again, which skips every recorded repeat (and every value the search's
ledger holds).
"""
import os
import shlex
import subprocess
import sys
import time
from typing import Optional

from submitit.helpers import Checkpointable, DelayedSubmission

from contract import spec as specs
from contract import paths, records
from launchers import sweepdir
from launchers.backends import containers, stopping
from launchers.backends.base import Launcher, NoVerdict
from launchers.backends.slurm import arrays, job, nodes, preview, sacct, srun, srun_output, watch
from launchers.backends.slurm.allocation import Allocation, AllocationEnding, log
from launchers.backends.slurm.step_watch import SrunRanks
from launchers.driver import ledger, preflight, repeats, search
from launchers.health import step as health_step
from launchers.suite import ROOT, ConfigError

SHAPE = ("nodes", "gpus_per_node", "world_size")  # an allocation's: the same for every try
HEALTH_POLL_S = 0.5
# Why a pending job waits, where waiting will not help: the request itself does not fit.
NEVER = ("PartitionNodeLimit", "PartitionConfig", "PartitionTimeLimit", "BadConstraints")


class SlurmLauncher(Launcher):
    name = "slurm"
    queues = True

    def __init__(self, allocation: Optional[Allocation] = None, search_base=None, log=print):
        super().__init__(log)
        # None on the submitting host, which reads it nowhere: the methods that do run in an allocation
        self.allocation: Allocation = allocation  # type: ignore[assignment]
        self.search_base = search_base  # in a search's allocation: the search's base point

    # ---- on the submitting host ----------------------------------------------------------
    def live(self, folders: list):
        return watch.live(folders)

    def cancel(self, sweep: str, folders: list):
        return watch.cancel(sweep, folders)

    def check(self, point) -> None:
        super().check(point)
        if point.search is not None and point.search["key"] in SHAPE:
            raise ConfigError(f"search key {point.search['key']} changes the allocation; on "
                                     "Slurm a search runs inside one allocation (sweep it instead: "
                                     "-m nodes=1,2,4)")
        containers.check_settings(point)
        most = point.cluster.max_gpus_per_node
        if point.cluster.gpus and most and point.gpus_per_node > int(most):
            raise ConfigError(f"gpus_per_node={point.gpus_per_node} is more than cluster "
                                     f"{point.cluster.name} has per node ({most})")

    def submit(self, pts: list, dry_run: bool = False) -> None:
        """Queue the sweep's Slurm points (every one checked before): one sbatch per allocation
        shape, a job array of its points, at most MaxArraySize tasks each; a search is one job."""
        searches = [p for p in pts if p.search is not None]
        plain = [p for p in pts if p.search is None]
        if dry_run:
            for group in arrays.shapes(plain):
                print(preview.group_text(group, arrays.name(group)))
            for point in searches:
                self.submit_search(point, dry_run=True)
            return
        job.preflight(pts)
        plain = containers.stamped(plain)  # the image digests, once per image
        todo = arrays.to_queue(plain)
        size = arrays.max_size() if len(todo) > 1 else 1
        by_point = {id(t[0]): t for t in todo}
        for group in arrays.shapes([t[0] for t in todo]):
            for start in range(0, len(group), size):
                part = [by_point[id(p)] for p in group[start:start + size]]
                job.submit_group(part, PointDriver, arrays.name([t[0] for t in part]))
        for point in searches:
            self.submit_search(point)

    def submit_search(self, base, dry_run: bool = False) -> None:
        """One job for the whole search, sized for its tries, its driver a SearchDriver (the
        base point travels with it: only the tries are points on disk)."""
        s = base.search  # checked and whole (launchers/plan/search.py)
        sized = base.replace(repeats=base.repeats * search.max_tries(s))  # the allocation's time
        if dry_run:
            print(f"{search.describe(base)}; on Slurm one allocation, each try's repeats srun steps in it")
            print(job.sbatch_script(sized).rstrip("\n"))
            return
        job.preflight([base])
        (base,) = containers.stamped([base])
        previous = job.read_slurm_json(base.dir)
        queued = str((previous or {}).get("job_id") or "")
        if queued and sacct.squeue_states([queued]).get(queued) in ("PENDING", "RUNNING"):
            print(f"{base.name}: search already queued as Slurm job {queued}")  # leave it be
            return
        done = ledger.read(base)
        if done and done["done"] and all(done[k] == s[k] for k in ("start", "max", "tolerance")):
            print(f"{base.name}: search {s['key']} is done (see {ledger.path(base)}); "
                  "nothing to submit")
            return
        os.makedirs(base.dir, exist_ok=True)
        (queued,) = job.submit(job.make_executor(sized), [SearchDriver(sweepdir.as_written(base))],
                               base.name, [base])
        ledger.begin(base)  # the ledger, so that `launch status` shows the search before its first try
        job.record(base, queued, previous, time_min=srun.time_limit_min(sized), search=base.name)
        print(f"{base.name}: search {s['key']} queued as Slurm job {queued.job_id} "
              f"(one allocation; at most {search.max_tries(s)} tries, each an srun step)")

    def health(self, point) -> dict:
        """One job of the point's shape whose driver runs the health step; wait for its verdict."""
        containers.require(health_step.as_pytorch(point))
        executor = job.make_executor(point, job_name="dlbench-health",
                                     folder=paths.submitit_dir(point.dir))
        executor.update_parameters(time=int(point.health.timeout_s // 60) + 3)
        (queued,) = job.submit(executor, [HealthDriver(sweepdir.as_written(point))],
                               "the health job", [point])
        verdict_file = os.path.join(point.dir, paths.HEALTH_FILE)
        said, look, unknown = None, 0.0, 0
        print(f"health: Slurm job {queued.job_id}, {point.nodes} node(s) x {point.gpus_per_node}")
        while not os.path.exists(verdict_file):
            time.sleep(HEALTH_POLL_S)
            if time.monotonic() < look:
                continue
            look = time.monotonic() + 2
            info = sacct.jobs([str(queued.job_id)]).get(str(queued.job_id)) or {}
            state = info.get("state")
            unknown = unknown + 1 if state is None else 0  # neither squeue nor sacct knows it
            if state == "PENDING" and (info.get("reason") or "").startswith(NEVER):
                subprocess.run(["scancel", str(queued.job_id)], capture_output=True, timeout=30)
                raise ConfigError(f"Slurm will not start the health job of {point.nodes} "
                                         f"node(s): {info['reason']} (the job is cancelled)")
            if state == "PENDING" and said != state:
                print(f"health: waiting for an allocation ({info.get('reason') or 'queued'})", flush=True)
            elif (state not in (None, "PENDING", "RUNNING") or unknown >= 3) \
                    and not os.path.exists(verdict_file):
                raise NoVerdict(f"the health job {queued.job_id} ended "
                                f"{(state or 'unknown to Slurm').lower()} without a verdict; "
                                f"its log: {queued.paths.stdout}")
            said = state
        return health_step.read_verdict(point.dir)

    # ---- in the allocation ---------------------------------------------------------------
    def hosts(self) -> list:
        return self.allocation.hosts

    def where(self) -> dict:
        return {"job_id": self.allocation.job_id, "nodes": self.allocation.hosts}

    def start_repeat(self, point, spec_path: str, rdir: str):
        """One repeat as one srun step -> (rank_ends, ended_by) (launchers/driver/repeats.py)."""
        alloc = self.allocation
        if alloc.ending:
            repeats.set_aside(rdir)
            raise AllocationEnding(alloc.ending)
        if self.search_base is not None:
            self.name_try(point)
        alloc.leave_lost_nodes(rdir)
        repeat = specs.read(spec_path).repeat
        argv = srun.repeat_argv(point, spec_path, rdir, sys.executable, srun.time_limit_min(point))
        try:
            ranks = self.srun(point, argv, rdir, f"repeat {repeat}", step_record=True)
            outcome, rank_ends = self.run_ranks(ranks, point, f"repeat {repeat}")
        except BaseException:  # submitit's requeue (SystemExit) or anything else: no record
            repeats.set_aside(rdir)
            raise
        if outcome.stop == "cancelled":  # the driver's stop signal: the allocation is ending
            repeats.set_aside(rdir)
            raise AllocationEnding(alloc.ending)
        # A step that failed while the allocation ends was cut short, not failed; unless a
        # rank had failed of itself before (the allocation may be ending because its node
        # died). One that succeeded is whole: its records are, and it is recorded.
        if outcome.stop is None and not outcome.failed and ranks.proc.returncode != 0 \
                and not alloc.still_running():
            repeats.set_aside(rdir)
            raise AllocationEnding(alloc.ending or "the job is no longer running")
        ended_by = outcome.ended_by
        if ended_by is None and "DUE TO TIME LIMIT" in ranks.watch.text:
            ended_by = "timeout"  # srun's --time backstop
        # Nodes to probe before the next step: where ranks vanished without a word.
        alloc.suspects = sorted({e["node"] for r, e in rank_ends.items() if e["node"]
                                 and r not in ranks.watch.records and e["exit_code"] is None
                                 and not e["signal"]} | set(srun_output.failed_nodes(ranks.watch.text)))
        return rank_ends, ended_by

    def start_health(self, point, spec_path: str, hdir: str) -> SrunRanks:
        argv = srun.health_argv(point, spec_path, hdir, sys.executable)
        return self.srun(point, argv, hdir, f"health step on {', '.join(self.hosts())}")

    def srun(self, point, argv: list, folder: str, what: str, step_record=False) -> SrunRanks:
        """One srun step of `argv` in this allocation, started: MASTER_ADDR the first host,
        MASTER_PORT the first free block of ports from the job id's slot (ports.py), the
        cluster's `env:` added; a repeat's step.json says so."""
        alloc = self.allocation
        alloc.end_lingering()
        port = srun.master_port(point, alloc.job_number)
        if step_record:
            records.write_json_atomic(os.path.join(folder, paths.STEP_FILE), {
                "argv": argv, "env": srun.step_env_additions(point, alloc.master, port),
                "job_id": alloc.job_id, "restarts": alloc.restarts, "nodelist": alloc.nodelist,
                "started_unix": time.time()})
        self.log(f"{what}: {shlex.join(argv)}")
        with open(os.path.join(folder, paths.SRUN_LOG), "w") as out:
            proc = subprocess.Popen(argv, cwd=ROOT, env=srun.step_env(point, alloc.master, port),
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return SrunRanks(proc, folder, point, alloc, self.log)

    def resubmit_without(self, point, state: dict) -> str:
        """The point again, without the sick nodes (sbatch --exclude), at most health.retries
        times, while its partition has enough usable nodes left; this allocation is given back."""
        retries = int(point.health.retries)
        if state["resubmissions"] >= retries:
            raise preflight.Unhealthy(f"still sick after {retries} resubmission(s): "
                                      f"{preflight.left_out(state)}")
        partition = point.cluster.partition or os.environ.get("SLURM_JOB_PARTITION")
        usable = {n for n, st in nodes.partition_nodes(partition).items()
                  if not st.startswith(("down", "drain", "fail", "maint")) and not st.endswith("*")}
        usable -= set(state["excluded"])
        if len(usable) < point.nodes:
            gone = len(state["excluded"])
            raise preflight.Unhealthy(f"needs {point.nodes} healthy node(s); partition {partition} "
                                      f"has {len(usable)} once {preflight.left_out(state)} "
                                      f"{'is' if gone == 1 else 'are'} left out")
        try:
            (queued,) = job.submit_group([(point, job.read_slurm_json(point.dir), False)],
                                         PointDriver, exclude=sorted(state["excluded"]))
        except ConfigError as exc:  # sbatch refused the exclusion: no node left to run on
            raise preflight.Unhealthy(f"{exc}; left out: {preflight.left_out(state)}") from None
        return str(queued.job_id)

    def name_try(self, point) -> None:
        """A search's try gets the search's job record (this job's, not an earlier search
        job's whose allocation ended in this try), so that `launch status` and `launch
        cancel` see every try's job. From the job's environment where the submitter has not
        written it yet (the job started first)."""
        base, job_id = self.search_base, self.allocation.job_id
        if (job.read_slurm_json(point.dir) or {}).get("job_id") == job_id:
            return
        rec = job.read_slurm_json(base.dir)
        if not rec or rec.get("job_id") != job_id:
            from submitit import JobEnvironment
            rec = {"schema": paths.SLURM_SCHEMA, "version": paths.SCHEMA_VERSION, "job_id": job_id,
                   "submitit_folder": job.submitit_folder(base),
                   "log": str(JobEnvironment().paths.stdout), "previous_jobs": []}
        records.write_json_atomic(os.path.join(point.dir, paths.SLURM_FILE),
                                  dict(rec, point=point.name, search=base.name))


# ---- in the allocation: submitit's callables, run as the batch shell ---------------------------
class Driver:
    """What a job runs as its batch shell: `run` with a SlurmLauncher of this allocation."""

    def launcher(self) -> SlurmLauncher:
        return SlurmLauncher(Allocation.here(), log=log)

    def __call__(self):
        try:
            return self.run(self.launcher())
        except (AllocationEnding, stopping.Stopped) as exc:
            raise SystemExit(f"driver: the allocation is ending ({exc}); unrecorded repeats "
                             "rerun when the job is requeued or the sweep resubmitted")

    def run(self, launcher):
        raise NotImplementedError


class PointDriver(Driver, Checkpointable):
    """One point's driver: its preflight, then its repeats. Checkpointable: on the requeue
    signal before the time limit, submitit calls checkpoint() and requeues the job, which
    reruns it (a driver holds no run-time state: the allocation is read anew each time)."""

    def __init__(self, point_dir: str):
        self.point_dir = point_dir

    def checkpoint(self, *args, **kwargs) -> DelayedSubmission:
        log("the allocation nears its time limit: requeueing; what is recorded is kept")
        return super().checkpoint(*args, **kwargs)

    def run(self, launcher):
        got = repeats.run_point(self.point_dir, launcher, log)
        if got is None:
            return "preflight: this allocation is given back (launchers/driver/preflight.py)"
        bad = [f"repeat {r}: {s}" for r, s in enumerate(got) if s != "ok"]
        if bad:  # the job's own state then says the point did not complete ok
            raise RuntimeError(f"{len(bad)} of {len(got)} repeat(s) not ok ({', '.join(bad)}); "
                               f"see {paths.RUN_FILE} in the repeat folders")
        return got


class SearchDriver(PointDriver):
    """One search's driver: the search loop (launchers/driver/search.py) in place of the
    repeat loop. The base point travels with it (it is written nowhere else)."""

    def __init__(self, base):
        super().__init__(base.dir)
        self.base = base

    def launcher(self) -> SlurmLauncher:
        return SlurmLauncher(Allocation.here(), search_base=self.base, log=log)

    def run(self, launcher):
        done = search.run(self.base, launcher, log)
        if done["stopped"]:  # a try neither ok nor oom: Slurm's own state says FAILED too
            raise RuntimeError(f"search {done['key']} stopped at {done['stopped']}")
        return done


class HealthDriver(Driver):
    """`launch health`'s driver: the health step in its allocation, on its first node."""

    def __init__(self, point):
        self.point = point

    def run(self, launcher):
        return launcher.health_step(self.point, self.point.dir)["ok"]
