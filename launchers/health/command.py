"""`python -m launch health [overrides]`: are the nodes of an allocation shaped like a point's
healthy? (docs/health.md)

    python -m launch health nodes=3 gpus_per_node=2 launcher=slurm cluster=localtest
    python -m launch health                           # this machine, with the local launcher

The overrides are a point's (nodes=, gpus_per_node=, launcher=, cluster=, health.*=), checked
as a sweep's are: bad input is one line and exit status 2, before anything runs. The point's
launcher object runs one health step (launchers/health/step.py) in an allocation of the
point's shape (`launcher.health`: on Slurm one job, whose verdict this command waits for;
locally the ranks run here). It prints one row per node and one line per slow link, writes
OUTPUT_ROOT/health-<time>/health.json (beside the ranks' records and logs), and exits 1 when
a node or a link is sick, else 0.
"""
import os
import sys
import time

import launchers
from contract import paths
from launchers.backends import auto
from launchers.backends.base import NoVerdict
from launchers.health import verdict as health_verdict
from launchers.plan import points, precheck


def compose(overrides: list):
    """The point's config, composed by Hydra as `python -m launch` would, without its run."""
    from hydra import compose as hydra_compose, initialize_config_dir
    with initialize_config_dir(config_dir=str(points.ROOT / "conf"), version_base=None):
        return hydra_compose(config_name="config", overrides=overrides)


def make(cfg, overrides: list, out: str):
    """The point whose allocation is checked (launchers/plan/points.py makes and checks it)
    and its launcher object, which checks it too."""
    if cfg.launcher.get("name") == "auto":
        auto.announce()
    point = points.make_point(cfg, out, 0, overrides, commit=None)
    point = point.replace(name="health", dir=os.path.abspath(out))
    launcher = launchers.get(point.launcher.name)
    launcher.check(point)
    return point, launcher


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
        point, launcher = make(cfg, overrides, out)
        os.makedirs(out, exist_ok=True)
        verdict = launcher.health(point)
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
