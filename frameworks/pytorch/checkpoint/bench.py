"""Checkpoints measured (docs/checkpoint.md): `bench=checkpoint` (CheckpointSession, whose
`run_bench` replaces the training loop, as bench=comm's does) and `checkpoint.every=N` inside
a training point is frameworks/pytorch/checkpoint/training.py. The checkpoint itself, DCP's
save and load, is frameworks/pytorch/checkpoint/dcp.py.

bench=checkpoint, one repeat: the point's model and layout built as for training, its
`warmup_steps` training steps (at least one: the optimizer's state exists only after a step),
`bench.warmup_saves` untimed cycles, then the timed one. A cycle:
1. the state's digest; a barrier; the save: `blocked_s` until the call returns (sync: the
   whole save; async: its staging), `durable_s` until every rank's files are fsynced and the
   folder committed (contract/paths.py: step-K.partial renamed step-K);
2. this rank's bytes (its shard files; rank 0 also the .metadata), evicted from the page
   cache (`bench.drop_cache`), the state zeroed, a barrier, the load (`load_s`), and the
   digest again: any difference fails the repeat (CheckpointMismatch), never a speed;
3. beside it the bare write of the same bytes by the same rank into one plain file, fsynced
   (`bare_write_s`), evicted, and read back (`bare_read_s`), on the same filesystem;
4. the files removed unless `checkpoint.keep`.
Each rank records its own times; the analysis takes the slowest rank's (analysis/figures/checkpoint.py).
"""
import math
import os
import time

import torch

from contract import checkpoint as settings_of
from contract import paths
from frameworks.common import bare_io
from frameworks.common.session import Session
from frameworks.pytorch import worker
from frameworks.pytorch.checkpoint.dcp import CheckpointMismatch, Saves, check_model, differences


def _clock(fn, *args):
    """(seconds fn(*args) took, what it returned)."""
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


class CheckpointSession(Session):
    """bench=checkpoint (module docstring): the point's training session, its checkpoints."""

    framework_version = torch.__version__

    def __init__(self, spec, dist):
        check_model(spec)
        self.opts = settings_of.bench_options(spec.bench_options)
        self.train = worker.session_of(spec.model.name)(spec, dist)   # its layout, no checkpoint.every
        self.saves = Saves(self.train, spec)
        self.ckpt, self.rank = self.saves.ckpt, dist.rank

    # the training session's surface
    def sync(self):
        self.train.sync()

    def barrier(self):
        self.train.barrier()

    def environment(self):
        return self.train.environment()

    def parallel_record(self):
        return self.train.parallel_record()

    def peak_device_bytes(self):
        return self.train.peak_device_bytes()

    def close(self):
        self.saves.close()
        self.train.close()

    def step(self):
        raise NotImplementedError("bench=checkpoint measures checkpoints, not training steps")

    def run_bench(self, spec, record, origin):
        saves = self.saves
        record["checkpoint"] = out = {"mode": saves.cfg.mode, "root": saves.root,
                                      "keep": saves.cfg.keep, "warmup": []}
        for i in range(max(1, spec.warmup_steps)):   # the optimizer's state exists after a step
            loss = self.train.loss_value(self.train.step())
            if not math.isfinite(loss):
                raise FloatingPointError(f"non-finite loss {loss} at training step {i}")
        self.sync()
        w0 = time.perf_counter()
        try:
            for k in range(self.opts.warmup_saves + 1):
                cycle = self.cycle(k)
                if k < self.opts.warmup_saves:
                    out["warmup"].append(cycle)
                else:
                    out.update(cycle)
        finally:
            record["window"] = {"start": w0 - origin, "end": time.perf_counter() - origin}
            saves.clean([os.path.join(saves.root, paths.bare_file_name(self.rank))])

    def cycle(self, k: int) -> dict:
        """One save, load and check, and the bare write and read beside it (module docstring)."""
        saves, ckpt, opts = self.saves, self.ckpt, self.opts
        ckpt.align_replicas()
        before = ckpt.digest()
        self.sync()
        self.barrier()
        t0 = time.perf_counter()
        pending = saves.start(k)
        blocked = time.perf_counter() - t0
        nbytes = saves.finish(k, pending)
        durable = time.perf_counter() - t0
        final = saves.final(k)
        if opts.drop_cache:
            ckpt.together("evicting the checkpoint from the page cache",
                          lambda: [bare_io.drop_cache(f) for f in ckpt.files(final)])
        if opts.drop_shard_rank == self.rank:   # testing only: a shard lost before the load
            for f in ckpt.files(final):
                if not f.endswith(paths.DCP_METADATA):
                    os.remove(f)
        ckpt.scramble()
        self.sync()
        self.barrier()
        load_s, _ = ckpt.together(f"loading {final}", lambda: _clock(ckpt.load, final), reading=True)
        self.sync()
        if opts.corrupt_rank == self.rank:
            ckpt.corrupt()
        after = ckpt.digest()
        wrong = differences(before, after)
        ckpt.together("checking the load", lambda: self._equal(wrong, len(before), final))
        cycle = {"step": k, "entries": len(before), "bytes": nbytes, "blocked_s": blocked,
                 "durable_s": durable, "load_s": load_s, "equal": True, **self.bare(nbytes)}
        saves.purge()
        return cycle

    def _equal(self, wrong, total, final) -> None:
        if wrong:
            raise CheckpointMismatch(
                f"rank {self.rank} loaded a state that differs from the one it saved to {final}: "
                f"{len(wrong)} of {total} entries, first {wrong[0]}")

    def bare(self, nbytes: int) -> dict:
        """The bare write and read of `nbytes` by this rank, beside its checkpoint."""
        ckpt = self.ckpt
        path = os.path.join(self.saves.root, paths.bare_file_name(self.rank))
        chunk = ckpt.bare_chunk(nbytes)
        self.barrier()
        write_s, _ = ckpt.together(f"writing {path}", lambda: _clock(bare_io.write_file, path, chunk, nbytes))
        if self.opts.drop_cache:
            ckpt.together(f"evicting {path}", lambda: bare_io.drop_cache(path))
        self.barrier()
        buf = bare_io.buffer(nbytes)
        read_s, got = ckpt.together(f"reading {path}", lambda: _clock(bare_io.read_file, path, buf))
        ckpt.together(f"reading {path}", lambda: _same(got, nbytes, path))
        if not self.saves.cfg.keep:
            bare_io.remove(path)
        return {"bare_bytes": nbytes, "bare_write_s": write_s, "bare_read_s": read_s}


def _same(got: int, want: int, path: str) -> None:
    if got != want:
        raise OSError(f"read {got} of the {want} bytes written to {path}")
