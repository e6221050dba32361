"""The suite's entry point, run once on the submitting host.

    python -m launch [-m] key=value ...     one point, or a sweep with -m
    python -m launch status SWEEP_DIR       where each point of a sweep stands
    python -m launch cancel SWEEP_DIR       stop what of it runs: Slurm jobs, a local launcher
    python -m launch dataset OUT            a small JPEG + BERT dataset for data=files
    python -m launch health [key=value ...] the nodes of a point's allocation: sick or not
    python -m launch certify SUITE [k=v ...] a cluster's verdict against baselines (certify/)
    python -m launch doctor cluster=SITE    would a sweep run on this site (one line per check)

Hydra composes conf/ into one config per sweep point (the suite's own sweeper and
launcher, hydra_plugins/dlbench_launcher); every point is validated and checked before
any runs (launchers/plan/sweep.py), written to SWEEP/points/<name>/point.json and handed to
its launcher object, `launcher=auto` by default (launchers/auto.py). Ranks
never run Hydra: they read the run spec the driver writes for them. Every command exits by
one table (contract/exits.py): a sweep 1 when a point it ran did not pass, 2 when refused
before anything ran (leaving no folder of its own), 128+N when stopped by signal N.
"""
import sys
import time

from contract import exits, secrets
from launchers.plan import one_point, precheck
from launchers.suite import ROOT


# What `python -m launch --help` prints: the suite's commands, the keys most used, where the rest
# is (tests/unit/golden/launch_help.txt pins it). Hydra's own help: --hydra-help, --cfg job.
HELP = """\
usage: python -m launch [-m] [key=value ...]     one point, or with -m a sweep of every combination
       python -m launch COMMAND [...]            COMMAND --help says more

commands:
  (none)    run a point, or with -m a sweep: every point checked before any runs or is queued
  status    where each point of a sweep stands; --wait until every one is final
  cancel    stop a sweep: its Slurm jobs, or its local launcher as Ctrl-C (--point GLOB)
  doctor    would a sweep run on this site? Slurm, the partition, a node, gres, NCCL, images
  health    are the nodes of an allocation healthy? one row per node, one line per slow link
  certify   a cluster's verdict: a suite of points against baselines, PASS or FAIL
  dataset   write a small JPEG + BERT dataset to train from files (data=files)
  and: python -m analysis report SWEEP   the report of a sweep (python -m analysis --help)

the keys most used (a comma list sweeps with -m: nodes=1,2,4):
  framework=pytorch       tensorflow, jax, paddle, mxnet, mindspore, oneflow
  model=resnet50          bert_base, gpt, llama3, deepseek_v3, qwen3_moe, gpt_oss, wide_deep, ...
  model.size=tiny         a model's small size, for a quick look on a CPU
  preset=smoke            a few tiny steps: does every point run?
  precision=fp32          amp
  nodes=1 gpus_per_node=1 batch_size=8 repeats=7
  launcher=auto           local (this machine), slurm (cluster=SITE: conf/cluster/SITE.yaml)
  dry_run=true            print what would run, run nothing
  hydra.sweep.dir=DIR     the sweep's folder (default outputs/<time>; hydra.run.dir without -m)

exit status: 0 every point ok (or unsupported), 1 a point did not pass, 2 refused before
anything ran, 3 status --wait gave up, 128+N stopped by signal N (docs/statuses.md)

the rest: every key in docs/configuration.md (docs/README.md: the index); the composed
config: python -m launch --cfg job [key=value ...]; Hydra's own options: --hydra-help"""


def run_point(argv) -> None:
    """One point (no -m), or one job of a sweep under another Hydra launcher; `-m` sweeps
    normally go through the suite's own (hydra_plugins/dlbench_launcher), which checks every
    point before any runs. Hydra reads its arguments from sys.argv: `argv` stands there while it
    runs. Hydra is imported here, not at the top: `status` and `cancel` answer without it (a
    quarter of a second less)."""
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from launchers import sweepdir
    from launchers.plan import sweep

    started = time.time()

    # An absolute path: the same conf/ whether run as `python -m launch` or as the installed
    # `dlbench` command (where Hydra would otherwise look for a package named conf).
    @hydra.main(config_path=str(ROOT / "conf"), config_name="config", version_base=None)
    def one(cfg) -> None:
        hc = HydraConfig.get()
        multirun = hc.mode == RunMode.MULTIRUN
        folder = hc.sweep.dir if multirun else hc.run.dir
        try:
            sweep.main([sweep.Job(cfg, folder, hc.job.num if multirun else 0, list(hc.overrides.task))])
        except SystemExit:  # refused: the folder Hydra made for it goes too, if nothing is in it
            if not multirun and sweepdir.made_since(folder, started):
                sweepdir.remove_unused(folder)
            raise

    saved = sys.argv
    sys.argv = [saved[0] if saved else "launch", *argv]
    try:
        one()
    finally:
        sys.argv = saved


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
        from launchers.commands import health
        return health.main(argv[1:])
    if argv[:1] == ["certify"]:
        from certify import command as certify
        return certify.main(argv[1:])
    if argv[:1] == ["doctor"]:
        from launchers.commands import doctor
        return doctor.main(argv[1:])
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return exits.OK
    problem = precheck.check(argv)
    if problem:
        return one_point.refuse(problem)
    from launchers.commands import outcome
    from launchers.plan import sweep
    sweep.ran.clear()
    try:
        run_point(argv)
    except SystemExit as exc:  # refused (2), stopped by a signal (128+N), or Hydra's own end
        return exc.code if isinstance(exc.code, int) else exits.OK if exc.code is None else exits.FAILED
    code, line = outcome.of_sweeps(sweep.ran)
    if line:
        print(secrets.mask_text(line), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
