"""The local launcher: a point's ranks as processes on this machine (one node).

Each rank gets the same environment contract as under Slurm (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Points run one after
another, synchronously: this is the embedded default that needs no cluster. The object
is at once the submitter and the allocation: this machine.

The launcher owns its ranks (launchers/backends/stopping.py): Ctrl-C, SIGTERM or SIGHUP
stops them by the step runner's rule and the repeat says `cancelled`; a launcher killed
outright takes them with it (the parent-death signal). Each rank leads a session of its
own, so that a terminal's Ctrl-C reaches the launcher alone (which stops the ranks in
order) and a signal to a rank's group reaches what the rank started.

From outside (`launch status`, `launch cancel`): each point's folder holds local.json, the
launcher that runs it (launchers/backends/local_owner.py). A point runs while that process
lives and has not ended it; `cancel` sends the launcher SIGINT, as Ctrl-C does, so its own
stop stops the ranks and records the repeat `cancelled`, and waits for it to end. A local
sweep is one process: cancelling one of its points stops the points after it too.
"""
import functools
import os
import signal
import subprocess
import sys
import time

from contract import spec as specs
from contract import owner, paths, statuses
from launchers import sweepdir
from launchers.backends import forked, local_owner, ports, secret_env, step, stopping, worker
from launchers.backends.base import Cancelled, Launcher, Live
from launchers.driver import preflight, repeats, search
from launchers.health import step as health_step
from launchers.suite import ROOT, ConfigError


class Processes(step.Ranks):
    """A step's ranks as processes here, each the leader of its own process group."""

    def __init__(self, procs: list):
        self.procs = procs
        self.signalled: set = set()  # ranks a stop signalled: their ends are not their own

    def poll(self) -> None:
        for p in self.procs:  # every rank, not just the first
            p.poll()

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def wait(self, seconds: float) -> bool:
        until = time.monotonic() + seconds
        for p in self.procs:
            try:
                p.wait(timeout=max(0.0, until - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return True

    def first_bad(self):
        for rank, p in enumerate(self.procs):
            if p.returncode not in (None, 0):
                return f"rank {rank}: {statuses.describe_end({'exit_code': p.returncode})}"
        return None

    def unended(self) -> set:
        return {r for r, p in enumerate(self.procs) if p.poll() is None}

    def signal(self, name: str) -> None:
        for rank in self.unended():
            self.signalled.add(rank)
            try:
                os.killpg(self.procs[rank].pid, getattr(signal, "SIG" + name))
            except ProcessLookupError:  # it ended just now
                pass

    def ends(self) -> dict:
        return {r: {"exit_code": p.returncode, "node": None} for r, p in enumerate(self.procs)
                if r not in self.signalled}

    def rank_ends(self, stopped) -> dict:
        return {r: {"exit_code": p.returncode, "node": None, "stopped": r in stopped}
                for r, p in enumerate(self.procs)}

    def close(self) -> None:
        """SIGKILL whatever each ended rank left in its process group: a loader's worker
        processes outlive a rank that leaves with os._exit (PaddlePaddle's did, asleep for
        good), and under Slurm the step's end would take them. Each rank leads its own group
        (start_new_session), so this reaches its descendants and nothing else."""
        for p in self.procs:
            if p.poll() is not None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):  # the group is empty: nothing left
                    pass


class LocalLauncher(Launcher):
    name = "local"
    # A rank's failure is seen here at once (its exit) and its peers write to this disk:
    # they get 5 s where the point leaves launcher.failure_grace_s unset.
    FAILURE_GRACE_S = 5
    no_site = "launcher=local runs on this machine, with no site to check"
    # `cancel`: the launcher's own stop takes step.TERM_S at most, then its ranks' SIGKILL
    STOP_WAIT_S = step.TERM_S + 5
    servers = None  # while it runs its points: their forkservers (launchers/backends/forked.py)

    def check(self, point) -> None:
        if point.nodes != 1:
            raise ConfigError(f"launcher=local runs on one node; nodes={point.nodes} "
                                     "needs launcher=slurm")
        worker.require(point)  # its interpreter, before any point runs (a dry run too)
        super().check(point)

    def submit(self, pts: list, dry_run: bool = False) -> None:
        """The sweep's local points, one after another; a search runs here, one try after
        another (launchers/driver/search.py). Each runs with its secrets in this process's
        environment, where its ranks get them (its files hold them masked: secret_env.py)."""
        if dry_run:
            for point in pts:
                print(search.describe(point) if point.search is not None else self.describe(point))
            return
        with stopping.owner(self.log), forked.Servers(self.log) as self.servers:
            for point in pts:
                with secret_env.exported([point]):
                    if point.search is not None:
                        os.makedirs(point.dir, exist_ok=True)  # for the search's own local.json
                        run = functools.partial(search.run, point, self, self.log)
                    else:
                        sweepdir.write_point(point)
                        run = functools.partial(repeats.run_point, point.dir, self, self.log)
                    local_owner.begin(point.dir)
                    try:
                        run()
                    finally:
                        local_owner.end(point.dir)

    def describe(self, point) -> str:
        """What a dry run prints of a point."""
        spec_path = os.path.join(point.repeat_dir(0), paths.SPEC_FILE)
        argv = worker.worker_argv(point, spec_path, sys.executable)
        return (f"{point.name}: {point.world_size} local rank(s) x {point.repeats} repeat(s): "
                f"{' '.join(argv)}")

    def health(self, point) -> dict:
        with stopping.owner(self.log):
            return self.health_step(point, point.dir)

    # ---- from outside: a sweep's local points -------------------------------------------
    def live(self, folders: list):
        out = {}
        for folder in folders:
            rec = local_owner.read(folder)
            runs = None if rec is None else local_owner.running(rec)
            if rec is None or runs is None:  # another host's launcher: the records and the heartbeat say
                continue
            job = f"pid {rec['pid']}"
            if runs:
                out[folder] = Live(job, "RUNNING")
            else:
                how = "stopped" if rec.get("ended_unix") else "died"
                out[folder] = Live(job, None, cancelled=bool(rec.get("cancelled_unix")),
                                   gone=f"its local launcher (pid {rec['pid']}) {how} before finishing it")
        return out, None

    def cancel(self, sweep: str, folders: list) -> Cancelled:
        """SIGINT to the launcher of each running point, once (Ctrl-C's stop), after marking
        the points cancelled; then at most STOP_WAIT_S for it to end."""
        recs = {f: r for f, r in ((f, local_owner.read(f)) for f in folders) if r is not None}
        elsewhere = sorted({str(r.get("host")) for r in recs.values() if local_owner.running(r) is None})
        running = {f: r for f, r in recs.items() if local_owner.running(r)}
        if not running:
            where = f" (run `launch cancel` on {', '.join(elsewhere)})" if elsewhere else ""
            return Cancelled(f"nothing to cancel: none of the {len(folders)} local point(s) of "
                             f"{sweep} is running{where}",
                             (f"points of {sweep} run on {', '.join(elsewhere)}: cancel them there",)
                             if elsewhere else ())
        drivers: dict = {}
        for f, r in running.items():
            drivers.setdefault((r["pid"], r["created"], r["host"]), []).append(f)
        when, t0 = time.time(), time.monotonic()
        for f in running:  # before the signal: the launcher's end keeps the mark
            local_owner.mark_cancelled(f, when)
        errors = []
        for (pid, _, _), fs in drivers.items():
            if not local_owner.alive(recs[fs[0]]):
                continue  # it ended just now, by itself
            try:
                os.kill(pid, signal.SIGINT)
            except (ProcessLookupError, PermissionError) as exc:
                errors.append(f"SIGINT to the local launcher (pid {pid}): {exc.strerror or exc}")
        left = set(drivers)
        while left and time.monotonic() - t0 < self.STOP_WAIT_S:
            left = {d for d in left if local_owner.alive(recs[drivers[d][0]])}
            if left:
                time.sleep(0.1)
        errors += [f"the local launcher (pid {pid}) has not ended {self.STOP_WAIT_S} s after its "
                   "SIGINT" for (pid, _, _) in sorted(left)]
        pids = ", ".join(str(pid) for pid, _, _ in drivers)
        return Cancelled(f"cancelled {len(running)} local point(s) of {sweep}: SIGINT to its "
                         f"launcher (pid {pids}), as Ctrl-C, "
                         + (f"which stopped its ranks and ended in {time.monotonic() - t0:.1f} s"
                            if not left else "which is still stopping")
                         + f"; recorded repeats are kept. Follow: python -m launch status {sweep}",
                         tuple(errors))

    # ---- this machine is the allocation ----------------------------------------------------
    def hosts(self) -> list:
        return [os.uname().nodename]

    def start_repeat(self, point, spec_path: str, rdir: str):
        if not local_owner.ours(point.dir):  # a search's try: its folder is new
            local_owner.begin(point.dir)
        ranks = self.start(point, worker.worker_argv(point, spec_path, sys.executable), rdir,
                           self.servers)
        repeat = specs.read(spec_path).repeat
        outcome, rank_ends = self.run_ranks(ranks, point, f"{point.name} repeat {repeat}")
        return rank_ends, outcome.ended_by

    def start_health(self, point, spec_path: str, hdir: str) -> Processes:
        return self.start(point, health_step.command(point, spec_path, sys.executable), hdir)

    def start(self, point, argv: list, folder: str, servers=None) -> Processes:
        """world_size processes of `argv`, each with its rank's environment and log; forked
        by `servers` where they fork it (launchers/backends/forked.py)."""
        port = ports.free_block(point.world_size)
        procs = []
        for rank in range(point.world_size):
            log_path, env = os.path.join(folder, paths.rank_log_name(rank)), rank_env(point, rank, port)
            forked_rank = servers.start(point, argv, env, log_path) if servers else None
            if forked_rank is not None:
                procs.append(forked_rank)
                continue
            with open(log_path, "w") as log:
                try:
                    procs.append(subprocess.Popen(argv, cwd=ROOT, env=env,
                                                  stdout=log, stderr=subprocess.STDOUT,
                                                  start_new_session=True,
                                                  preexec_fn=owner.die_with_owner()))
                except OSError as exc:  # not an interpreter at all: the repeat fails, saying so
                    step.stop(Processes(procs), step.TERM_S)
                    raise worker.WorkerUnavailable(f"cannot start {argv[0]}: "
                                                   f"{exc.strerror or exc}") from None
        return Processes(procs)

    def resubmit_without(self, point, state: dict):
        raise preflight.Unhealthy("this machine is sick and the local launcher has no other "
                                  f"node: {preflight.left_out(state)}")


def rank_env(point, rank: int, port: int, base=None) -> dict:
    world = point.world_size
    env = {**{str(k): str(v) for k, v in point.cluster.env.items()}, **secret_env.values(point, base)}
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # An outer allocation's variables would mislead.
    env = worker.rank_environ(base, lambda name: name.startswith("SLURM_"), env)
    # Share the cores among the ranks instead of letting each claim them all.
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world)))
    return env
