"""Hydra callbacks: after a sweep, say where its results are and how to read them."""
from hydra.experimental.callback import Callback


class WhereResults(Callback):
    def _say(self, config, folder) -> None:
        if config.get("dry_run"):
            return
        print(f"sweep folder: {folder}\n"
              f"  status: python -m launch status {folder}\n"
              f"  report: python -m analysis report {folder}")

    def on_run_end(self, config, **kwargs) -> None:
        self._say(config, config.hydra.run.dir)

    def on_multirun_end(self, config, **kwargs) -> None:
        self._say(config, config.hydra.sweep.dir)
