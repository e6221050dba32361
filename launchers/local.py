"""Local launcher: a point's ranks as processes on this machine (one node).

Each rank gets the same environment contract as under Slurm (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Points run one after
another, synchronously: this is the embedded default that needs no cluster.
"""
import os
import signal
import subprocess
import sys
import time

from contract import paths
from launchers import driver, health_step, points, ports, preflight, search

GRACE_S = 5  # how long ranks may outlive a failed peer, and SIGTERM may take, before SIGKILL


def check(point: dict) -> None:
    if point["nodes"] != 1:
        raise points.ConfigError(f"launcher=local runs on one node; nodes={point['nodes']} "
                                 "needs launcher=slurm")
    if point.get("search") is not None:
        search.settings(point)


def rank_env(point: dict, rank: int, port: int, base=None) -> dict:
    world = point["world_size"]
    env = {str(k): str(v) for k, v in point["cluster"].get("env", {}).items()}
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # An outer allocation's variables would mislead.
    env = points.rank_environ(base, lambda name: name.startswith("SLURM_"), env)
    # Share the cores among the ranks instead of letting each claim them all.
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world)))
    return env


def _stop(procs) -> set:
    """End the ranks still running: SIGTERM (they write `cancelled` records), then SIGKILL.
    Returns the indices of the ranks this stopped."""
    stopped = {i for i, p in enumerate(procs) if p.poll() is None}
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5)):
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, sig)
        deadline = time.monotonic() + wait
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
    return stopped


def wait_ranks(procs, timeout_s: float):
    """Wait for all ranks; stop the rest when one fails or the repeat times out.
    Returns (rank_ends, ended_by): how each rank's process ended (statuses.run_outcome)."""
    deadline = time.monotonic() + timeout_s
    failed_at, ended_by, stopped = None, None, set()
    try:
        while [p.poll() for p in procs].count(None):  # poll every rank, not just the first
            if time.monotonic() > deadline:
                stopped, ended_by = _stop(procs), "timeout"
                break
            if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > GRACE_S:
                stopped = _stop(procs)
            time.sleep(0.05)
    except BaseException:
        _stop(procs)
        raise
    finally:
        _reap_groups(procs)
    return {r: {"exit_code": p.returncode, "node": None, "stopped": r in stopped}
            for r, p in enumerate(procs)}, ended_by


def _reap_groups(procs) -> None:
    """SIGKILL whatever each ended rank left in its process group: a loader's worker
    processes outlive a rank that leaves with os._exit (PaddlePaddle's did, asleep for
    good), and under Slurm the step's end would take them. Each rank leads its own group
    (start_new_session), so this reaches its descendants and nothing else."""
    for p in procs:
        if p.poll() is not None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):  # the group is empty: nothing left
                pass


def start_repeat(point: dict, spec_path: str, rdir: str):
    """One repeat's ranks as processes here -> (rank_ends, ended_by)."""
    argv = points.worker_argv(point, spec_path, sys.executable)
    port = ports.free_block(point["world_size"])
    procs = []
    for rank in range(point["world_size"]):
        with open(os.path.join(rdir, paths.rank_log_name(rank)), "w") as log:
            try:
                procs.append(subprocess.Popen(argv, cwd=points.ROOT, env=rank_env(point, rank, port),
                                              stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True))
            except OSError as exc:  # not an interpreter at all: the repeat fails, saying so
                _stop(procs)
                raise points.WorkerUnavailable(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    return wait_ranks(procs, point["timeout_s"])


def run_health(point: dict, hdir: str) -> dict:
    """The health step here (launchers/health_step.py): one node, gpus_per_node ranks."""
    spec = health_step.write_spec(point, hdir)
    argv = health_step.command(point, spec, sys.executable)
    port = ports.free_block(point["world_size"])
    procs = []
    for rank in range(point["world_size"]):
        with open(os.path.join(hdir, paths.rank_log_name(rank)), "w") as log:
            procs.append(subprocess.Popen(argv, cwd=points.ROOT, env=rank_env(point, rank, port),
                                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    timeout = float(point["health"]["timeout_s"])
    ends, ended_by = wait_ranks(procs, timeout)
    return health_step.finish(point, hdir, [os.uname().nodename],
                              ended_by and f"the health step passed health.timeout_s={timeout:g}",
                              {r: e for r, e in ends.items() if not e["stopped"]},
                              {r for r, e in ends.items() if e["stopped"]})


def submit(point: dict, dry_run: bool = False) -> None:
    if dry_run:
        argv = points.worker_argv(point, os.path.join(points.repeat_dir(point, 0), paths.SPEC_FILE),
                                  sys.executable)
        print(f"{point['point']}: {point['world_size']} local rank(s) x {point['repeats']} "
              f"repeat(s): {' '.join(argv)}")
        return
    points.write_point(point)
    if preflight.on_local(point, lambda hdir: run_health(point, hdir)):
        driver.run_point(point["dir"], start_repeat)


def submit_search(point: dict, dry_run: bool = False) -> None:
    """Run the search here, one try after another (launchers/search.py)."""
    if dry_run:
        print(search.describe(point))
        return
    search.run(point, start_repeat)


def submit_all(pts: list, dry_run: bool = False) -> None:
    """The sweep's local points, one after another (every one was checked before)."""
    for point in pts:
        (submit_search if point.get("search") is not None else submit)(point, dry_run=dry_run)
