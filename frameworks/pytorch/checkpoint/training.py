"""checkpoint.every=N inside a training point (docs/checkpoint.md): the point's own training
session (frameworks/pytorch/worker.py wraps it), checkpointing through
frameworks/pytorch/checkpoint/dcp.py as it trains."""
import time

from frameworks.common import harness
from frameworks.pytorch.checkpoint.dcp import Saves, check_model


class Checkpointing:
    """checkpoint.every=N inside a training point: the point's own session, and after its
    last warm-up step (DCP's first save is slower) and every N-th timed step a checkpoint,
    inside the timed window, so that the throughput counts what checkpoints cost training.
    sync: the step waits for the save to be durable; async: for its staging, and for the
    previous save's upload where that has not finished. The last timed step waits for the
    last save, so the window holds every save it started. Only the latest checkpoint is
    kept while training (older ones removed, as torchtitan's keep_latest_k), none after
    unless `keep`. Every other hook is the session's."""

    def __init__(self, make, spec, dist):
        check_model(spec)                 # before the model is built
        session = self._session = make(spec, dist)
        self.saves = Saves(session, spec)
        self.every, self.warmup = self.saves.cfg.every, spec.warmup_steps
        self.total, self.done, self.pending, self.log = spec.warmup_steps + spec.measure_steps, 0, None, []

    def __getattr__(self, name):   # only for what this class lacks: the session's hooks
        if name == "_session":
            raise AttributeError(name)
        return getattr(self._session, name)

    def step(self):
        handle = self._session.step()
        self.done += 1
        timed = self.done - self.warmup
        if self.done <= self.total and ((timed == 0 and self.warmup) or (timed > 0 and timed % self.every == 0)):
            self._save()
        if self.done == self.total:
            self._settle()
        return handle

    def _save(self) -> None:
        t0 = time.perf_counter()
        self._settle()    # an async save still uploading: training waits for it here
        pending = self.saves.start(self.done)
        entry = {"step": self.done, "timed": self.done > self.warmup}
        self.pending = (pending, entry, t0)
        if pending is None:   # sync: written; durable and committed before training goes on
            self._settle()
        entry["blocked_s"] = time.perf_counter() - t0

    def _settle(self) -> None:
        if self.pending is None:
            return
        pending, entry, t0 = self.pending
        self.pending = None
        entry["bytes"] = self.saves.finish(entry["step"], pending)
        entry["durable_s"] = time.perf_counter() - t0
        self.log.append(entry)
        self.saves.purge()

    def run_bench(self, spec, record, origin):
        try:
            harness.run_steps(self, spec, record, origin)
        finally:
            record["checkpoint"] = {"mode": self.saves.cfg.mode, "every": self.every,
                                    "root": self.saves.root, "keep": self.saves.cfg.keep,
                                    "saves": self.log}
            self.saves.clean()

    def close(self):
        self.saves.close()
        self._session.close()
