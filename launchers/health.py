"""`python -m launch health [overrides]`: are the nodes of an allocation shaped like a point's
healthy? (docs/health.md)

    python -m launch health nodes=3 gpus_per_node=2 launcher=slurm cluster=localtest
    python -m launch health                           # this machine, with the local launcher

The overrides are a point's (nodes=, gpus_per_node=, launcher=, cluster=, health.*=), checked
as a sweep's are: bad input is one line and exit status 2, before anything runs. On Slurm
one job of the point's shape runs the health step (launchers/health_step.py) on its first
node and this command waits for its verdict; locally the ranks run here. It prints one row
per node and one line per slow link, writes OUTPUT_ROOT/health-<time>/health.json (beside
the ranks' records and logs), and exits 1 when a node or a link is sick, else 0.
"""
import os
import subprocess
import sys
import time

from contract import paths
from launchers import health_step, health_verdict, local, points, precheck, slurm_job

POLL_S = 0.5
# Why a pending job waits, where waiting will not help: the request itself does not fit.
NEVER = ("PartitionNodeLimit", "PartitionConfig", "PartitionTimeLimit", "BadConstraints")


class NoVerdict(RuntimeError):
    """The health job ended without a verdict: said in one line, exit status 1."""


def compose(overrides: list):
    """The point's config, composed by Hydra as `python -m launch` would, without its run."""
    from hydra import compose as hydra_compose, initialize_config_dir
    with initialize_config_dir(config_dir=str(points.ROOT / "conf"), version_base=None):
        return hydra_compose(config_name="config", overrides=overrides)


def make(cfg, overrides: list, out: str) -> dict:
    """The point whose allocation is checked (launchers/points.py makes and checks it)."""
    import launchers
    from launchers import auto
    if cfg.launcher.get("name") == "auto":
        auto.announce()
    point = points.make_point(cfg, out, 0, overrides, commit=None)
    point.update(point="health", dir=os.path.abspath(out))
    launchers.get(point["launcher"]["name"]).check(point)
    return point


# ---- on Slurm: one job of the point's shape --------------------------------------------------
class HealthDriver:
    """submitit's callable: the health step in its allocation, on its first node."""

    def __init__(self, point: dict):
        self.point = point

    def __call__(self):
        from launchers import slurm_nodes
        hosts = slurm_nodes.hostnames(os.environ["SLURM_JOB_NODELIST"])
        verdict = health_step.run_slurm(self.point, self.point["dir"], hosts, slurm_nodes.this_job(),
                                        os.environ["SLURM_JOB_ID"])
        return verdict["ok"]


def run_slurm(point: dict) -> dict:
    from launchers import sacct
    executor = slurm_job.make_executor(point, job_name="dlbench-health",
                                       folder=paths.submitit_dir(point["dir"]))
    executor.update_parameters(time=int(point["health"]["timeout_s"] // 60) + 3)
    try:
        with slurm_job.submission_environ():
            job = executor.submit(HealthDriver(point))
    except Exception as exc:  # sbatch refused the allocation: say why in one line
        raise points.ConfigError(f"sbatch refused the health job: {' '.join(str(exc).split())[-400:]}") from None
    verdict_file = os.path.join(point["dir"], paths.HEALTH_FILE)
    said, look, unknown = None, 0.0, 0
    print(f"health: Slurm job {job.job_id}, {point['nodes']} node(s) x {point['gpus_per_node']}")
    while not os.path.exists(verdict_file):
        time.sleep(POLL_S)
        if time.monotonic() < look:
            continue
        look = time.monotonic() + 2
        info = sacct.jobs([str(job.job_id)]).get(str(job.job_id)) or {}
        state = info.get("state")
        unknown = unknown + 1 if state is None else 0  # neither squeue nor sacct knows it
        if state == "PENDING" and (info.get("reason") or "").startswith(NEVER):
            subprocess.run(["scancel", str(job.job_id)], capture_output=True, timeout=30)
            raise points.ConfigError(f"Slurm will not start the health job of {point['nodes']} "
                                     f"node(s): {info['reason']} (the job is cancelled)")
        if state == "PENDING" and said != state:
            print(f"health: waiting for an allocation ({info.get('reason') or 'queued'})", flush=True)
        elif (state not in (None, "PENDING", "RUNNING") or unknown >= 3) \
                and not os.path.exists(verdict_file):
            raise NoVerdict(f"the health job {job.job_id} ended {(state or 'unknown to Slurm').lower()} "
                            f"without a verdict; its log: {job.paths.stdout}")
        said = state
    return health_step.read_verdict(point["dir"])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    problem = precheck.check(argv)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    t0 = time.monotonic()
    try:
        import omegaconf
        cfg = compose(overrides)
        out = paths.health_run_dir(cfg.output_root)
        point = make(cfg, overrides, out)
        os.makedirs(out, exist_ok=True)
        if point["launcher"]["name"] == "local":
            verdict = local.run_health(point, out)
        else:
            verdict = run_slurm(point)
    except (points.ConfigError, omegaconf.errors.OmegaConfBaseException) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except NoVerdict as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(health_verdict.render(verdict))
    print(f"health: {'ok' if verdict['ok'] else 'SICK'} in {time.monotonic() - t0:.1f} s; "
          f"{os.path.join(out, paths.HEALTH_FILE)}")
    return 0 if verdict["ok"] else 1
