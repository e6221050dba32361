"""The suite's entry point, run once on the submitting host.

    python -m launch [-m] key=value ...     one point, or a sweep with -m
    python -m launch status SWEEP_DIR       where each point of a sweep stands
    python -m launch cancel SWEEP_DIR       cancel its Slurm jobs ([--point GLOB])
    python -m launch dataset OUT            a small JPEG + BERT dataset for data=files

Hydra composes conf/ into one config per sweep point; each point is validated,
written to SWEEP/points/<name>/point.json and handed to its launcher. Ranks
never run Hydra: they read the run spec the driver writes for them.
"""
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

import launchers
from launchers import points, precheck


# An absolute path: the same conf/ whether run as `python -m launch` or as the installed
# `dlbench` command (where Hydra would otherwise look for a package named conf).
@hydra.main(config_path=str(points.ROOT / "conf"), config_name="config", version_base=None)
def run_point(cfg) -> None:
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    sweep_dir = hc.sweep.dir if multirun else hc.run.dir
    try:
        point = points.make_point(cfg, sweep_dir, hc.job.num if multirun else 0,
                                  hc.overrides.task)
        launcher = launchers.get(cfg.launcher.name)
        launcher.check(point)
        if point["search"] is not None:  # the largest value that trains: a loop of points
            launcher.submit_search(point, dry_run=cfg.dry_run)
        else:
            launcher.submit(point, dry_run=cfg.dry_run)
    except points.ConfigError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write results under {sweep_dir}: {exc.strerror or exc}")


def _fail(message: str):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["status"]:
        from launchers import status
        return status.main(argv[1:])
    if argv[:1] == ["cancel"]:
        from launchers import cancel
        return cancel.main(argv[1:])
    if argv[:1] == ["dataset"]:
        from launchers import dataset
        return dataset.main(argv[1:])
    problem = precheck.check(argv)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    run_point()
    return 0


if __name__ == "__main__":
    sys.exit(main())
