"""The sweeper and launcher behind `python -m launch -m ...`.

DlbenchSweeper is Hydra's basic sweeper (the same override grammar, the cartesian product,
hydra.sweep.dir and its multirun.yaml, whose secrets it masks) without its
validate_batch_is_legal, which composes every job a first time only for the launcher to
compose it again.

DlbenchLauncher gets all the jobs' overrides at once: it composes each (compose.py: once
per distinct combination of group choices) and hands them to launchers/plan/sweep.py, which
checks every point before any runs or is queued, then gives each launcher its points
together. Jobs do not go through Hydra's run_job: no per-job folder (SWEEP/<num>/, empty
before) and no per-job callbacks; the sweep's callbacks (on_multirun_end) run as before. A
sweep refused before anything ran leaves no folder behind (launchers/sweepdir.py remove_unused).
"""
import os

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.utils import JobReturn, JobStatus, setup_globals
from hydra.plugins.launcher import Launcher


class DlbenchSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch) -> None:
        """Nothing: DlbenchLauncher composes and checks every job before any runs."""

    def sweep(self, arguments):
        """Hydra's sweep, its multirun.yaml written with the secrets masked (contract/secrets.py):
        BasicSweeper.sweep saves `self.config`, which the launcher no longer reads (it was set
        up with its own), so the masked copy stands in for it while the sweep runs."""
        from omegaconf import OmegaConf

        from contract import secrets
        config = self.config
        self.config = OmegaConf.create(secrets.masked(OmegaConf.to_container(config, resolve=False)))
        self.config.hydra.sweep.dir = config.hydra.sweep.dir   # ${now:...} once, the sweep's own
        folder = str(self.config.hydra.sweep.dir)
        fresh = not os.path.exists(folder)
        try:
            return super().sweep(arguments)
        except SystemExit:  # refused before anything ran: the folder it made goes, if still empty
            if fresh:
                from launchers import sweepdir
                sweepdir.remove_unused(folder)
            raise
        finally:
            self.config = config


class DlbenchLauncher(Launcher):
    def setup(self, *, hydra_context, task_function, config) -> None:
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config

    def launch(self, job_overrides, initial_job_idx):
        from launchers.plan import sweep  # the suite, imported only when a sweep runs
        from hydra_plugins.dlbench_launcher.compose import Compositions
        setup_globals()
        compositions = Compositions(self.hydra_context.config_loader, self.config)
        jobs = []
        for num, overrides in enumerate(job_overrides, start=initial_job_idx):
            try:
                cfg, sweep_dir = compositions.job(overrides)
            except Exception as exc:  # Hydra's own message, in one line
                first = str(exc).strip().splitlines()[:1] or [type(exc).__name__]
                sweep.fail(f"cannot compose sweep point {num} ({' '.join(overrides)}): {first[0]}")
            jobs.append(sweep.Job(cfg, sweep_dir, num, list(overrides)))
        names = sweep.main(jobs)
        return [JobReturn(overrides=list(job.overrides), working_dir=job.sweep_dir,
                          task_name=self.config.hydra.job.name, status=JobStatus.COMPLETED,
                          _return_value=name) for job, name in zip(jobs, names)]
