"""A point's checkpoint settings, checked once and read the same on both sides: the submitting
side refuses a bad one in one line (launchers/plan/points.py), a rank reads it from its run
spec (frameworks/pytorch/checkpoint/bench.py). docs/checkpoint.md says what each does.

    checkpoint.dir    where (null: SWEEP/checkpoints/; contract/paths.py checkpoint_root)
    checkpoint.mode   sync | async (DCP's async_save)
    checkpoint.every  bench=train: a checkpoint every N timed steps (null: none)
    checkpoint.keep   leave the files (default: removed after each repeat)

and the options of bench=checkpoint (conf/bench/checkpoint.yaml). Standard library only.
"""
import os
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Optional

from . import values

MODES = ("sync", "async")


@dataclass(frozen=True)
class Checkpoint:
    dir: Optional[str] = None
    mode: str = "sync"
    every: Optional[int] = None
    keep: bool = False

    def label(self, bench: str) -> str:
        """What a point's name says of it: `ckpt-sync` (bench=checkpoint), `ckpt10-async`
        (training with a checkpoint every 10 steps), "" (training without)."""
        if bench == "checkpoint":
            return f"ckpt-{self.mode}"
        return f"ckpt{self.every}-{self.mode}" if self.every else ""


@dataclass(frozen=True)
class BenchOptions:
    """bench=checkpoint's own options (conf/bench/checkpoint.yaml)."""
    warmup_saves: int = 1          # untimed save-and-load cycles before the timed one
    drop_cache: bool = True        # the written files evicted from the page cache before reading
    corrupt_rank: Optional[int] = None     # testing only: this rank changes its state after the load
    drop_shard_rank: Optional[int] = None  # testing only: this rank deletes its shard before the load


def settings(config: Mapping[str, Any] | None) -> Checkpoint:
    """The checked `checkpoint` mapping of a point's config (absent: the defaults); ValueError
    in one line when a key is unknown or a value wrong. A relative dir is made absolute."""
    given = dict((config or {}).get("checkpoint") or {})
    unknown = sorted(set(given) - set(Checkpoint.__dataclass_fields__))
    if unknown:
        raise ValueError(f"checkpoint: unknown key(s) {', '.join(unknown)} (valid: dir, mode, every, keep)")
    s = Checkpoint(**given)
    if s.mode not in MODES:
        raise ValueError(f"checkpoint.mode must be sync or async, got {s.mode!r}")
    values.optional(values.integer, s.every, "checkpoint.every", 1)
    values.boolean(s.keep, "checkpoint.keep")
    if s.dir is not None:
        if not isinstance(s.dir, str) or not s.dir:
            raise ValueError(f"checkpoint.dir must be a folder's path or null, got {s.dir!r}")
        s = Checkpoint(os.path.abspath(os.path.expanduser(s.dir)), s.mode, s.every, s.keep)
    return s


def bench_options(options: Mapping[str, Any] | None) -> BenchOptions:
    """bench=checkpoint's options (the point's `bench` mapping, its `name` aside), checked."""
    given = {k: v for k, v in dict(options or {}).items() if k != "name"}
    unknown = sorted(set(given) - set(BenchOptions.__dataclass_fields__))
    if unknown:
        raise ValueError(f"bench: unknown option(s) {', '.join(unknown)} for bench=checkpoint "
                         f"(valid: {', '.join(BenchOptions.__dataclass_fields__)})")
    o = BenchOptions(**given)
    values.integer(o.warmup_saves, "bench.warmup_saves", 0)
    values.boolean(o.drop_cache, "bench.drop_cache")
    values.optional(values.integer, o.corrupt_rank, "bench.corrupt_rank", 0)
    values.optional(values.integer, o.drop_shard_rank, "bench.drop_shard_rank", 0)
    return o
