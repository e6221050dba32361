"""A rank's checkpoint through torch.distributed.checkpoint (DCP): its state, saved blocking or
asynchronously, made durable and committed, loaded back, and its digest to compare what was
loaded with what was saved (Checkpointer); the folder its saves go to (Saves); the models
built for it (their spec's `checkpoint`: check_model). docs/checkpoint.md; what measures it:
frameworks/pytorch/checkpoint/bench.py (bench=checkpoint) and training.py (checkpoint.every).

- The state is the model's and the optimizer's, by `get_state_dict` (FSDP2 and DTensor aware:
  each rank saves its own shards), the optimizer's flattened per parameter
  (`flatten_optimizer_state_dict`, as torchtitan saves it): the stages of a pipeline hold
  different parameters, and unflattened their `param_groups` are one key on every rank,
  which DCP saves once (seen here: the other stages' learning rates lost at load).
- A rank's parts are one ModuleDict, a stage each (`stage<id>`): a pipeline rank saves each
  of its stages under its own name.
- A save goes to `step-K.partial/` and becomes `step-K/` only once durable: DCP fsyncs every
  file and writes its .metadata last; every rank fsyncs the folder, then rank 0 renames it and
  fsyncs the parent. A folder without the suffix is a whole checkpoint; nothing else is loaded.
- async: `dcp.async_save`, its upload in a thread on a process group of its own (gloo), so that
  training's collectives never interleave with the checkpoint's; the state staged first into
  host memory (DCP's DefaultStager, pinned where there is a GPU), blocking: once the call
  returns, training may change the state. One stager for every save, so that its pinned
  buffers are reused, where this torch's stager stages more than once (`reusable_stager`:
  torch 2.11's closes itself after each stage, and its second raises KeyError), else a new
  one each save.
- A storage failure ends every rank with a named status (contract/statuses.py): DCP gathers
  every rank's failure into one CheckpointException, and `together` does the same for the
  steps that are not DCP's, so no rank waits on one that has left.
"""
import functools
import hashlib
import os
import threading

import numpy as np
import torch
import torch.distributed as torch_dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from contract import checkpoint as settings_of
from contract import models, paths, statuses
from frameworks.common import bare_io, capability
from frameworks.pytorch.layouts.parallelize import local

OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)
SHARD_PREFIX = "__{rank}_"      # DCP's name of a rank's data files: __<rank>_<k>.distcp


class CheckpointFailed(RuntimeError):
    """A checkpoint step failed for a reason that is not its storage's: `failed`."""


class CheckpointMismatch(RuntimeError):
    """The state loaded back differs from the state saved: `failed`, never a speed."""


ENDINGS = {c.__name__: c for c in (statuses.Unwritable, statuses.DiskFull, statuses.MissingShard,
                                   CheckpointFailed, CheckpointMismatch)}


def parts(session) -> nn.Module:
    """A training session's model as one module: a layout's stages in a ModuleDict
    (frameworks/pytorch/lm_session.py's `modules`, torchtitan's `parts`), else its model."""
    modules = getattr(session, "modules", None) or getattr(session, "parts", None)
    if modules is None:
        return session.model
    ids = getattr(session, "ids", None) or range(len(modules))
    return nn.ModuleDict({f"stage{i}": m for i, m in zip(ids, modules)})


def _leaves(value, name=""):
    """(name, leaf) of a nested state dict, in a fixed order."""
    if isinstance(value, dict):
        for k in sorted(value, key=str):
            yield from _leaves(value[k], f"{name}.{k}" if name else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{name}.{i}")
    else:
        yield name, value


def tensor_bytes(t: torch.Tensor) -> np.ndarray:
    """A tensor's (its local part's) bytes on the host, as a flat uint8 array."""
    t = local(t).detach()
    return t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy()


def digest(state) -> dict:
    """name -> a digest of each leaf of a state dict: sha256 of a tensor's local bytes (with
    its dtype and shape), repr of anything else."""
    out = {}
    for name, v in _leaves(state):
        if torch.is_tensor(v):
            h = hashlib.sha256(f"{v.dtype}{tuple(local(v).shape)}".encode())
            h.update(tensor_bytes(v).data)
            out[name] = h.hexdigest()
        else:
            out[name] = repr(v)
    return out


def differences(saved: dict, loaded: dict) -> list:
    """The names whose digests differ, or that only one side has."""
    return sorted(k for k in set(saved) | set(loaded) if saved.get(k) != loaded.get(k))


def _causes(exc, seen=None):
    """exc, the failures DCP gathered into it (rank, exception), and their causes."""
    seen = seen if seen is not None else set()
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    yield None, exc
    for rank, failure in (getattr(exc, "failures", None) or {}).items():
        inner = failure[0] if isinstance(failure, tuple) else failure
        for _, e in _causes(inner, seen):
            yield rank, e
    yield from _causes(exc.__cause__, seen)
    yield from _causes(exc.__context__, seen)


def describe(exc, what: str, rank: int, reading: bool = False):
    """(the ending's class name, its message) for an exception of step `what` on `rank`: the
    first OSError whose errno names a storage ending (contract/statuses.py), else `failed`
    with the first cause DCP gathered (or the exception itself)."""
    causes = list(_causes(exc))
    for where, e in causes:
        cls = isinstance(e, OSError) and statuses.storage_ending(e.errno, reading)
        if cls:
            return cls.__name__, f"{what} (rank {rank if where is None else where}): {e}"
    if isinstance(exc, (CheckpointMismatch, CheckpointFailed)):
        return type(exc).__name__, str(exc)
    where, first = next(((w, e) for w, e in causes if w is not None), (None, exc))
    text = str(first).strip().splitlines()[0] if str(first).strip() else ""
    return CheckpointFailed.__name__, \
        f"{what} (rank {rank if where is None else where}): {type(first).__name__}: {text}"


def together(group, rank: int, what: str, fn, reading: bool = False):
    """fn() on every rank, then every rank learns whether any failed: if one did, each raises
    the first failure (by rank) as its ending, so that no rank is left waiting in a
    collective for one that has left. `group`: None for one rank alone."""
    try:
        out, failure = fn(), None
    except (Exception, CheckpointException) as exc:  # DCP's is a BaseException
        out, failure = None, describe(exc, what, rank, reading)
    failures = [failure]
    if group is not None:
        failures = [None] * torch_dist.get_world_size(group)
        torch_dist.all_gather_object(failures, failure, group=group)
    first = next((f for f in failures if f), None)
    if first:
        name, message = first
        raise ENDINGS[name](message)
    return out


class Checkpointer:
    """One rank's checkpoints of a training session's model and optimizer (module docstring)."""

    def __init__(self, session, mode: str, cuda: bool):
        self.model, self.optimizers, self.mode = parts(session), [session.optimizer], mode
        distributed = torch_dist.is_available() and torch_dist.is_initialized()
        # DCP's own group: an async upload's collectives run beside training's and beside
        # `together`'s, which has another (two threads on one gloo group mix their messages)
        self.dcp_group = torch_dist.new_group(backend="gloo") if distributed else None
        self.group = torch_dist.new_group(backend="gloo") if distributed else None
        self.rank = torch_dist.get_rank() if distributed else 0
        self.staging = StagingOptions(use_pinned_memory=cuda, use_shared_memory=False,
                                      use_async_staging=False, use_non_blocking_copy=False)
        self.stager: DefaultStager | None = None
        self.spent: list = []   # spent: single-use stagers, closed at close()

    def together(self, what, fn, reading=False):
        return together(self.group, self.rank, what, fn, reading)

    def state(self) -> dict:
        model, optim = get_state_dict(self.model, self.optimizers, options=OPTIONS)
        return {"model": model, "optim": optim}

    def digest(self) -> dict:
        return digest(self.state())

    def save(self, path: str):
        """Start a save into `path`: sync returns once written (None); async once staged, with
        the upload's future."""
        writer = dcp.FileSystemWriter(path, sync_files=True)
        if self.mode == "sync":
            dcp.save(self.state(), storage_writer=writer, process_group=self.dcp_group)
            return None
        if self.stager is None or not reusable_stager():
            if self.stager is not None:
                self.spent.append(self.stager)
            self.stager = DefaultStager(self.staging)
        return dcp.async_save(self.state(), storage_writer=writer, process_group=self.dcp_group,
                              async_stager=self.stager)

    @staticmethod
    def finish(pending, path: str) -> None:
        """Wait for a save (an async one's upload) and make its folder's entries durable."""
        if pending is not None:
            pending.result()
        bare_io.fsync_dir(path)

    def commit(self, partial: str, final: str) -> None:
        """Rank 0 renames a written, synced checkpoint into place (`together` around it is the
        barrier that every rank's files are synced first) and syncs the parent folder."""
        if self.rank == 0:
            os.rename(partial, final)
            bare_io.fsync_dir(os.path.dirname(final))

    def load(self, path: str) -> None:
        """Load a committed checkpoint into the model and optimizer."""
        if not os.path.isfile(os.path.join(path, paths.DCP_METADATA)):
            raise FileNotFoundError(2, f"no {paths.DCP_METADATA}: not a whole checkpoint", path)
        state = self.state()
        dcp.load(state, checkpoint_id=path, process_group=self.dcp_group)
        set_state_dict(self.model, self.optimizers, model_state_dict=state["model"],
                       optim_state_dict=state["optim"], options=OPTIONS)

    def files(self, path: str) -> list:
        """This rank's files of a checkpoint: its shards, and rank 0 the .metadata."""
        prefix = SHARD_PREFIX.format(rank=self.rank)
        names = [n for n in os.listdir(path) if n.startswith(prefix)
                 or (self.rank == 0 and n == paths.DCP_METADATA)]
        return [os.path.join(path, n) for n in sorted(names)]

    @torch.no_grad()
    def align_replicas(self) -> None:
        """DDP's replicas, their buffers made rank 0's (BatchNorm's statistics): between steps
        each replica holds its own batch's, DDP broadcasts rank 0's at the next forward, and a
        checkpoint keeps one copy of what every replica holds under one name."""
        for m in self.model.modules():
            if isinstance(m, nn.parallel.DistributedDataParallel) and m.broadcast_buffers:
                src = torch_dist.get_global_rank(m.process_group, 0)
                for b in m.module.buffers():
                    torch_dist.broadcast(b, src=src, group=m.process_group)

    @torch.no_grad()
    def scramble(self) -> None:
        """Zero the parameters and the optimizer's state, so that only a load restores them."""
        for p in self.model.parameters():
            local(p).zero_()
        for opt in self.optimizers:
            for state in opt.state.values():
                for v in state.values():
                    if torch.is_tensor(v):
                        local(v).zero_()

    @torch.no_grad()
    def corrupt(self) -> None:
        """Testing only (bench.corrupt_rank): change one value of this rank's first parameter."""
        first = next(iter(self.model.parameters()))
        local(first).view(-1)[0] += 1

    def bare_chunk(self, nbytes: int) -> np.ndarray:
        """Up to bare_io.CHUNK of this rank's state bytes (a bare write repeats it to its size):
        the values a checkpoint holds, so that a compressing filesystem gains nothing extra."""
        want, got, size = min(nbytes, bare_io.CHUNK), [], 0
        for _, v in _leaves(self.state()):
            if torch.is_tensor(v) and size < want:
                b = tensor_bytes(v)[:want - size]
                got.append(b)
                size += len(b)
        return np.concatenate(got) if got else np.zeros(max(1, want), np.uint8)

    def close(self) -> None:
        for stager in self.spent + [self.stager]:
            if stager is not None:
                stager.close()


@functools.lru_cache(maxsize=None)
def reusable_stager() -> bool:
    """Whether this torch's DefaultStager stages more than once: torch 2.11's `_stage` closes
    its state-dict stager after each stage (emptying its copiers), so a second stage fails
    with "KeyError: <class 'type'>"; asked once, of a stager staging a tensor twice."""
    probe = DefaultStager(StagingOptions(use_pinned_memory=False, use_shared_memory=False,
                                         use_async_staging=False, use_non_blocking_copy=False))
    try:
        for _ in range(2):
            probe.stage({"probe": torch.zeros(1)})
        return True
    except Exception:  # noqa: BLE001 (whatever its second stage raises)
        return False
    finally:
        probe.close()


def check_model(spec) -> None:
    """Checkpoints are built for the models whose whole state is their session's model (or
    stages) and optimizer (their spec's `checkpoint`). Wide & Deep and InsightFace keep shards
    as plain tensors of one name on every rank: DCP would keep one."""
    if not models.get(spec.model.name).checkpoint:
        built = models.named(lambda s: s.checkpoint)
        raise capability.Unsupported(
            f"checkpoints are built for model={', '.join(built)}, not model={spec.model.name} "
            "(its shards are plain tensors of one name on every rank)")


class Saves:
    """The saves of one rank into one folder: each started into step-K.partial, finished
    (durable) and committed as step-K; the last committed kept, older ones purged unless
    `keep`; `clean()` removes what is left unless `keep`."""

    def __init__(self, session, spec):
        self.cfg = settings_of.settings(spec.config)
        self.ckpt = Checkpointer(session, self.cfg.mode, getattr(session, "cuda", False))
        self.root = paths.checkpoint_root(spec.record_dir, self.cfg.dir)
        self.committed, self.purging = [], []
        self.ckpt.together(f"making checkpoint.dir {self.root}",
                           lambda: os.makedirs(self.root, exist_ok=True))

    def final(self, k: int) -> str:
        return os.path.join(self.root, paths.checkpoint_name(k))

    def start(self, k: int):
        partial = self.final(k) + paths.PARTIAL_SUFFIX
        return self.ckpt.together(f"saving {partial}", lambda: self.ckpt.save(partial))

    def finish(self, k: int, pending) -> int:
        """Wait, sync, commit; returns this rank's bytes of the committed checkpoint."""
        partial, final = self.final(k) + paths.PARTIAL_SUFFIX, self.final(k)
        self.ckpt.together(f"saving {partial}", lambda: self.ckpt.finish(pending, partial))
        self.ckpt.together(f"committing {final}", lambda: self.ckpt.commit(partial, final))
        self.committed.append(final)
        return sum(os.path.getsize(f) for f in self.ckpt.files(final))

    def purge(self) -> None:
        """Remove the committed checkpoints before the last (rank 0, in a thread, as torchtitan
        purges: training does not wait for it), unless `keep`."""
        if self.cfg.keep:
            return
        while len(self.committed) > 1:
            old = self.committed.pop(0)
            if self.ckpt.rank == 0:
                t = threading.Thread(target=bare_io.remove, args=(old,), daemon=True)
                t.start()
                self.purging.append(t)

    def clean(self, extra=()) -> None:
        """Remove this repeat's files unless `keep` (partial folders are never a checkpoint):
        each rank its own `extra`, rank 0 the folder, and the point's once it is empty."""
        if self.cfg.keep:
            return
        for path in extra:
            bare_io.remove(path)
        for t in self.purging:
            t.join()
        if self.ckpt.rank == 0:
            bare_io.remove(self.root)
            try:
                os.rmdir(os.path.dirname(self.root))
            except OSError:
                pass   # another repeat's files, or already gone

    def close(self) -> None:
        self.ckpt.close()
