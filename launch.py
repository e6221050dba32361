"""The suite's entry point, run once on the submitting host.

    python -m launch [-m] key=value ...     one point, or a sweep with -m
    python -m launch status SWEEP_DIR       where each point of a sweep stands
    python -m launch cancel SWEEP_DIR       cancel its Slurm jobs ([--point GLOB])
    python -m launch dataset OUT            a small JPEG + BERT dataset for data=files
    python -m launch health [key=value ...] the nodes of a point's allocation: sick or not
    python -m launch certify SUITE [k=v ...] a cluster's verdict against baselines (certify/)
    python -m launch doctor cluster=SITE    would a sweep run on this site (one line per check)

Hydra composes conf/ into one config per sweep point (the suite's own sweeper and
launcher, hydra_plugins/dlbench_launcher); every point is validated and checked before
any runs (launchers/plan/sweep.py), written to SWEEP/points/<name>/point.json and handed to
its launcher object, `launcher=auto` by default (launchers/auto.py). Ranks
never run Hydra: they read the run spec the driver writes for them.
"""
import sys

from contract import secrets
from launchers.plan import one_point, precheck
from launchers.suite import ROOT


def run_point() -> None:
    """One point (no -m), or one job of a sweep under another Hydra launcher; `-m` sweeps
    normally go through the suite's own (hydra_plugins/dlbench_launcher), which checks every
    point before any runs. Hydra is imported here, not at the top: `status` and `cancel`
    answer without it (a quarter of a second less)."""
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from launchers.plan import sweep

    # An absolute path: the same conf/ whether run as `python -m launch` or as the installed
    # `dlbench` command (where Hydra would otherwise look for a package named conf).
    @hydra.main(config_path=str(ROOT / "conf"), config_name="config", version_base=None)
    def one(cfg) -> None:
        hc = HydraConfig.get()
        multirun = hc.mode == RunMode.MULTIRUN
        sweep.main([sweep.Job(cfg, hc.sweep.dir if multirun else hc.run.dir,
                              hc.job.num if multirun else 0, list(hc.overrides.task))])
    one()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with secrets.masked_output(argv):   # nothing it prints shows a secret (contract/secrets.py)
        return command(argv)


def command(argv) -> int:
    if argv[:1] == ["status"]:
        from launchers.commands import status
        return status.main(argv[1:])
    if argv[:1] == ["cancel"]:
        from launchers.commands import cancel
        return cancel.main(argv[1:])
    if argv[:1] == ["dataset"]:
        from launchers.commands import dataset
        return dataset.main(argv[1:])
    if argv[:1] == ["health"]:
        from launchers.health import command
        return command.main(argv[1:])
    if argv[:1] == ["certify"]:
        from certify import command as certify
        return certify.main(argv[1:])
    if argv[:1] == ["doctor"]:
        from launchers.commands import doctor
        return doctor.main(argv[1:])
    problem = precheck.check(argv)
    if problem:
        return one_point.refuse(problem)
    run_point()
    return 0


if __name__ == "__main__":
    sys.exit(main())
