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
from contract import exits, paths
from launchers import auto
from launchers.backends.base import NoVerdict
from launchers.health import verdict as health_verdict
from launchers.plan import one_point, points


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
    try:
        overrides = one_point.overrides(argv, __doc__)
    except one_point.Done as done:
        return done.code
    t0 = time.monotonic()
    try:
        cfg = one_point.compose(overrides)
        out = paths.health_run_dir(cfg.output_root)
        point, launcher = make(cfg, overrides, out)
        os.makedirs(out, exist_ok=True)
        verdict = launcher.health(point)
    except one_point.bad_input() as exc:
        return one_point.refuse(exc)
    except NoVerdict as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exits.FAILED
    print(health_verdict.render(verdict))
    print(f"health: {'ok' if verdict['ok'] else 'SICK'} in {time.monotonic() - t0:.1f} s; "
          f"{os.path.join(out, paths.HEALTH_FILE)}")
    return exits.OK if verdict["ok"] else exits.FAILED
