"""A point's layout: how its devices split the model and the batch, and the relations that
must hold between the sizes, written once (docs/layouts.md). The launcher checks every point
with `resolve` and `model_violations` before any point runs (launchers/plan/points.py); the PyTorch
worker builds its device mesh from the layout and `coords`. Standard library only: it runs in the framework's
Python too.

The devices of a point form a grid (pp, dp, cp, tp): tensor parallel innermost, so that a
tensor-parallel group is neighbouring ranks (one node while tp <= gpus_per_node, where its
all-reduces ride NVLink), context parallel next (its ring or all-gather of keys and values is
the next heaviest traffic), pipeline outermost (its point-to-point sends are the lightest
traffic, so they cross nodes), as Megatron-LM and torchtitan order them (torchtitan's
["pp", "dp_replicate", "dp_shard", "cp", "tp"], its two data-parallel axes one here):

    rank = ((pp_i * dp + dp_i) * cp + cp_i) * tp + tp_i

Context parallelism (`cp`) splits each sequence into 2 x cp chunks, a rank taking chunks
cp_i and 2 cp - 1 - cp_i, so that every rank holds as much of the causal attention's work
(torchtitan's and Megatron-LM's load balancing); its ranks train on the same samples, so
the data-parallel size is devices / (tp x pp x cp).

Expert parallelism (`ep`, a mixture of experts' routed experts split over ep ranks) adds no
axis: it borrows the ranks of one pipeline stage, as torchtitan's does (its mesh rule
dp_shard x cp x tp = efsdp x ep; here the one data-parallel axis dp stands for dp_shard).
A stage's dp x cp x tp ranks, in grid order, form an (edp, ep) grid, ep innermost:

    flat = (dp_i * cp + cp_i) * tp + tp_i,   ep_i = flat % ep,   edp_i = flat // ep

an expert group is ep neighbouring ranks (inside a node while ep <= gpus_per_node); the
ranks that hold the same experts (edp of them) average those experts' gradients.

Relations, each a line naming its values when it fails (DLPerf's GPT README lists the first
five; the schedules' own rules are torch.distributed.pipelining's):

    dp x tp x pp x cp = nodes x gpus_per_node     dp derived when not given
    micro x dp x accumulation = global            accumulation derived
    hidden % heads = 0
    heads % tp = 0
    layers % (pp x stages per rank) = 0           stages per rank: virtual_stages, else 1
    kv_heads % tp = 0                             grouped-query attention (Llama 3)
    vocabulary % tp = 0                           else padded as Megatron pads it: up to a
                                                  multiple of 128 x tp, and said (always,
                                                  where the model sets vocab_multiple)
    sequence % (2 x cp) = 0                       two equal chunks per context-parallel rank
    dp x cp x tp = edp x ep                       ep divides a stage's ranks (torchtitan's
                                                  dp_shard x cp x tp = efsdp x ep)
    experts % ep = 0                              whole experts per expert-parallel rank
    sequence % (cp x tp) = 0                      with ep and tp: each tp rank routes its
                                                  part of the sequence (torchtitan's)
    schedule 1f1b: accumulation >= pp             (a micro-batch in flight per stage)
    schedule interleaved_1f1b: accumulation a multiple of max(1, accumulation // pp)

Which models are built for which axes, and what tensor parallelism must divide, is each
model's spec (contract/models/: `layouts`, `tp_divides`). A published layout (analysis/
published_layouts.py) is checked by the same relations: the grid, the batches, the experts'
mesh and the shape (`data_parallel`, `accumulation_of`, `replica_violations`,
`expert_grid_violations`, `shape_violations`).
"""
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from contract import models

SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b")
MEGATRON_VOCAB_MULTIPLE = 128  # Megatron-LM's make-vocab-size-divisible-by (default)
DEFAULTS = {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "dp": None, "fsdp": False, "schedule": "1f1b",
            "virtual_stages": 2, "sequence_parallel": False}


class LayoutError(ValueError):
    """A setting that is not a layout at all (a negative size, an unknown schedule)."""


@dataclass(frozen=True)
class Layout:
    dp: int
    tp: int
    pp: int
    fsdp: bool
    schedule: str
    virtual_stages: int        # stages each pipeline rank holds (interleaved_1f1b), else 1
    sequence_parallel: bool
    micro_batch_size: int      # samples in one forward of one data-parallel rank
    accumulation: int          # micro-batches per iteration (pipeline: n_microbatches)
    global_batch_size: int     # samples of one iteration, all ranks
    cp: int = 1                # context-parallel size: each sequence split over cp ranks
    ep: int = 1                # expert-parallel size: routed experts split over ep ranks of a stage

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def stages(self) -> int:
        return self.pp * self.virtual_stages

    @property
    def edp(self) -> int:
        """Ranks of a stage that hold the same experts: dp x cp x tp / ep (torchtitan's efsdp)."""
        return max(self.dp * self.cp * self.tp // self.ep, 1)

    @property
    def per_replica(self) -> int:
        """Samples one data-parallel rank trains on per iteration: micro x accumulation."""
        return self.micro_batch_size * self.accumulation

    def is_data_parallel(self) -> bool:
        """Plain data parallelism, one micro-batch: the layout every model has always had."""
        return self.tp == self.pp == self.cp == self.ep == 1 and not self.fsdp and self.accumulation == 1

    def _parts(self) -> list[str]:
        pipe = {"gpipe": "gpipe", "1f1b": "", "interleaved_1f1b": f"v{self.virtual_stages}"}
        parts = [pipe[self.schedule] if self.pp > 1 else "", "fsdp" if self.fsdp else "",
                 "sp" if self.sequence_parallel and self.tp > 1 else "",
                 f"m{self.accumulation}" if self.accumulation > 1 else ""]
        return [p for p in parts if p]

    def name(self) -> str:
        """The point name's part, empty for plain data parallelism: 'tp2-pp2-fsdp-m4'."""
        sizes = [f"tp{self.tp}"] * (self.tp > 1) + [f"pp{self.pp}"] * (self.pp > 1)
        return "-".join(sizes + self._cp() + self._parts())

    def _cp(self) -> list[str]:
        return [f"cp{self.cp}"] * (self.cp > 1) + [f"ep{self.ep}"] * (self.ep > 1)

    def key(self) -> str:
        """What tells layouts apart across device counts (dp left out: it grows with them),
        'tp1-pp1' for plain data parallelism: the report's speedup compares within a key."""
        return "-".join([f"tp{self.tp}", f"pp{self.pp}"] + self._cp() + self._parts())

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "world": self.world, "stages": self.stages}

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> "Layout":
        """The layout of a point's or spec's `parallel` (as_dict's extra keys ignored; a
        point written before context or expert parallelism has cp 1, ep 1)."""
        return cls(**{f: d[f] for f in cls.__dataclass_fields__ if f in d})

    def with_micro(self, micro: int) -> "Layout":
        """The same layout at another micro-batch (a search of batch_size): the global batch
        follows, the accumulation stays."""
        return replace(self, micro_batch_size=micro,
                       global_batch_size=micro * self.dp * self.accumulation)


def _int(value: Any, key: str, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise LayoutError(f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def _bool(value: Any, key: str) -> bool:
    if value not in (True, False):
        raise LayoutError(f"{key} must be true or false, got {value!r}")
    return bool(value)


def resolve(parallel: Mapping[str, Any] | None, devices: int, batch_size: int, micro_batch_size: int | None = None,
            global_batch_size: int | None = None) -> tuple["Layout", list[str]]:
    """(Layout, violations): the layout of `devices` ranks from the `parallel` settings and
    the batch sizes, and the relations it breaks (lines; empty when none). LayoutError for a
    value that is not a size at all."""
    p = {**DEFAULTS, **{k: v for k, v in (parallel or {}).items() if v is not None or k == "dp"}}
    unknown = sorted(set(p) - set(DEFAULTS))
    if unknown:
        raise LayoutError(f"unknown parallel key(s) {', '.join(unknown)} "
                          f"(valid: {', '.join(DEFAULTS)})")
    tp, pp, cp = _int(p["tp"], "parallel.tp"), _int(p["pp"], "parallel.pp"), _int(p["cp"], "parallel.cp")
    ep = _int(p["ep"], "parallel.ep")
    fsdp = _bool(p["fsdp"], "parallel.fsdp")
    sp = _bool(p["sequence_parallel"], "parallel.sequence_parallel")
    if p["schedule"] not in SCHEDULES:
        raise LayoutError(f"parallel.schedule must be one of {', '.join(SCHEDULES)}, "
                          f"got {p['schedule']!r}")
    virtual = _int(p["virtual_stages"], "parallel.virtual_stages") \
        if p["schedule"] == "interleaved_1f1b" and pp > 1 else 1
    micro = _int(batch_size if micro_batch_size is None else micro_batch_size, "micro_batch_size")
    dp, bad = data_parallel(devices, tp, pp, cp, None if p["dp"] is None else _int(p["dp"], "parallel.dp"))
    glob = micro * dp if global_batch_size is None else _int(global_batch_size, "global_batch_size")
    accumulation, more = accumulation_of(micro, dp, glob)
    bad += more
    layout = Layout(dp, tp, pp, fsdp, p["schedule"], virtual, sp, micro, accumulation, glob, cp, ep)
    bad += schedule_violations(layout) + expert_violations(layout)
    return layout, bad


def data_parallel(devices: int, tp: int, pp: int, cp: int, dp: int | None = None) -> tuple[int, list[str]]:
    """(dp, violations) of dp x tp x pp x cp = devices: dp as given, else derived."""
    grid, names = tp * pp * cp, "tp x pp" + " x cp" * (cp > 1)
    sizes = f"{tp} x {pp}" + f" x {cp}" * (cp > 1)
    if dp is None:
        if devices % grid:
            return max(devices // grid, 1), [
                f"dp x {names} = nodes x gpus_per_node: {names} = {sizes} = {grid} "
                f"does not divide the {devices} devices"]
        return devices // grid, []
    if dp * grid != devices:
        return dp, [f"dp x {names} = nodes x gpus_per_node: {dp} x {sizes} = "
                    f"{dp * grid}, not the {devices} devices"]
    return dp, []


def accumulation_of(micro: int, dp: int, glob: int, given: int | None = None) -> tuple[int, list[str]]:
    """(accumulation, violations) of micro x dp x accumulation = global: derived, or `given`
    checked."""
    if given is not None:
        if micro * dp * given != glob:
            return given, [f"micro x dp x accumulation = global: {micro} x {dp} x {given} = "
                           f"{micro * dp * given}, not {glob}"]
        return given, []
    accumulation, rest = divmod(glob, micro * dp)
    if rest or not accumulation:
        return max(accumulation, 1), [
            f"micro x dp x accumulation = global: {micro} x {dp} x accumulation = {glob} "
            f"has no whole accumulation (global_batch_size must be a multiple of {micro * dp})"]
    return accumulation, []


def replica_violations(per_replica: int, dp: int, glob: int) -> list[str]:
    """A data-parallel replica's samples an iteration (micro x accumulation) x dp = global."""
    if per_replica * dp == glob:
        return []
    return [f"per replica x dp = global: {per_replica} x {dp} = {per_replica * dp}, not {glob}"]


def schedule_violations(layout: Layout) -> list[str]:
    """torch.distributed.pipelining's own rules for its schedules, checked up front."""
    if layout.pp == 1:
        return []
    m, pp = layout.accumulation, layout.pp
    if layout.schedule == "1f1b" and m < pp:
        return [f"schedule 1f1b needs accumulation >= pp (a micro-batch per stage): "
                f"accumulation = {m}, pp = {pp}"]
    if layout.schedule == "interleaved_1f1b" and m % max(1, m // pp):
        return [f"schedule interleaved_1f1b needs accumulation a multiple of max(1, "
                f"accumulation // pp) = {max(1, m // pp)}: accumulation = {m}, pp = {pp}"]
    return []


def expert_violations(layout: Layout) -> list[str]:
    """torchtitan's mesh rule for expert parallelism: ep borrows the ranks of a stage."""
    return expert_grid_violations(layout.dp, layout.cp, layout.tp, layout.ep)


def expert_grid_violations(dp: int, cp: int, tp: int, ep: int) -> list[str]:
    stage = dp * cp * tp
    if ep == 1 or stage % ep == 0:
        return []
    return [f"dp x cp x tp = edp x ep (torchtitan's dp_shard x cp x tp = efsdp x ep): ep = "
            f"{ep} does not divide dp x cp x tp = {dp} x {cp} x {tp} = {stage}"]


def padded_vocab(vocab: int, tp: int, multiple: int | None = None) -> int:
    """The vocabulary a tensor-parallel model holds, padded as Megatron-LM pads it (its padded
    rows are logits too): up to a multiple of `multiple` x tp (its make-vocab-size-divisible-by,
    a model's `vocab_multiple`); without `multiple`, as given where tp divides it, else up to a
    multiple of 128 x tp."""
    if multiple is None:
        if vocab % tp == 0:
            return vocab
        multiple = MEGATRON_VOCAB_MULTIPLE
    step = multiple * tp
    return -(-vocab // step) * step


def pad_vocabulary(model: dict[str, Any], tp: int) -> str | None:
    """Pads a point's model (resolved settings, changed in place: `vocab_size` the padded
    vocabulary, `data_vocab_size` the one its tokens come from) and says so, or None where
    the vocabulary is kept."""
    vocab, multiple = model.get("vocab_size"), model.get("vocab_multiple")
    if not vocab or padded_vocab(vocab, tp, multiple) == vocab:
        return None
    model["data_vocab_size"], model["vocab_size"] = vocab, padded_vocab(vocab, tp, multiple)
    step = multiple or MEGATRON_VOCAB_MULTIPLE
    return (f"vocabulary {vocab} padded to {model['vocab_size']} (a multiple of {step} x tp = "
            f"{step * tp}), as Megatron-LM pads it")


def layout_models() -> tuple[str, ...]:
    """The models built on layouts (their spec names an axis beyond plain data parallelism)."""
    return models.named(lambda s: s.layouts)


# A parallel axis (contract/models/ AXES): how a refusal names it, whether a layout uses it
AXIS_USE: dict[str, tuple[str, Callable[[Layout], bool]]] = {
            "tp": ("tensor parallelism (tp = {tp})", lambda lay: lay.tp > 1),
            "pp": ("pipeline parallelism (pp = {pp})", lambda lay: lay.pp > 1),
            "fsdp": ("FSDP", lambda lay: lay.fsdp),
            "cp": ("context parallelism (cp = {cp})", lambda lay: lay.cp > 1),
            "ep": ("expert parallelism (ep = {ep})", lambda lay: lay.ep > 1),
            "sp": ("sequence parallelism", lambda lay: lay.sequence_parallel and lay.tp > 1)}


def unbuilt(model: Mapping[str, Any], layout: Layout, axes: Iterable[str]) -> list[str]:
    """One line per axis of `axes` the layout uses and the model's spec is not built for."""
    spec, name = models.find(model.get("name")), model.get("name")
    bad = []
    for axis in axes:
        words, used = AXIS_USE[axis]
        if used(layout) and not (spec and axis in spec.layouts):
            built = models.named(lambda s: axis in s.layouts)
            bad.append(f"{words.format(**layout.as_dict())} is built for model={', '.join(built)} "
                       f"only, not model={name}")
    return bad


def shape_violations(model: Mapping[str, Any], tp: int) -> list[str]:
    """A transformer's shape against itself and tensor parallelism: hidden % heads, heads %
    kv_heads, and what its spec says tp divides (heads, key-value heads; both where the model
    is none of the suite's), each where the model states it."""
    spec = models.find(model.get("name"))
    h, a, kv = model.get("hidden"), model.get("heads"), model.get("kv_heads")
    bad: list[str] = []
    if h and a and h % a:
        bad.append(f"hidden % heads = 0: {h} % {a} = {h % a}")
    if kv and a and a % kv:
        bad.append(f"heads % kv_heads = 0: {a} % {kv} = {a % kv}")
    for key in (spec.tp_divides if spec else ("heads", "kv_heads")):
        v = model.get(key)
        if v and v % tp:
            bad.append(f"{key} % tp = 0: {v} % {tp} = {v % tp}")
    return bad


def model_violations(model: Mapping[str, Any], layout: Layout) -> list[str]:
    """The model's relations to the layout: its shape (shape_violations), the axes its spec
    is built for, its layers over the pipeline's stages and its sequence over cp."""
    layers, seq = model.get("layers"), model.get("seq_len")
    bad = shape_violations(model, layout.tp) + unbuilt(model, layout, ("tp", "pp", "fsdp"))
    if layers and layers % layout.stages:
        what = (f"layers % (pp x virtual_stages) = 0: {layers} % ({layout.pp} x "
                f"{layout.virtual_stages})" if layout.virtual_stages > 1 else
                f"layers % pp = 0: {layers} % {layout.pp}")
        bad.append(f"{what} = {layers % layout.stages}")
    bad += unbuilt(model, layout, ("cp",))
    if seq and layout.cp > 1 and seq % (2 * layout.cp):
        bad.append(f"sequence % (2 x cp) = 0: {seq} % (2 x {layout.cp}) = {seq % (2 * layout.cp)}")
    return bad + unbuilt(model, layout, ("sp",)) + expert_model_violations(model, layout)


def expert_model_violations(model: Mapping[str, Any], layout: Layout) -> list[str]:
    """The mixture of experts' relations to the layout (experts % ep, the tp ranks' parts of
    the sequence), and ep > 1 for a model without experts."""
    if layout.ep == 1:
        return []
    if unbuilt(model, layout, ("ep",)):
        return unbuilt(model, layout, ("ep",))
    experts, seq = model.get("experts"), model.get("seq_len")
    bad: list[str] = []
    if experts and experts % layout.ep:
        bad.append(f"experts % ep = 0: {experts} % {layout.ep} = {experts % layout.ep}")
    split = layout.cp * layout.tp
    if seq and layout.tp > 1 and seq % split:
        bad.append(f"sequence % (cp x tp) = 0 (with ep, each tp rank routes its part of the "
                   f"sequence): {seq} % ({layout.cp} x {layout.tp}) = {seq % split}")
    return bad


def coords(rank: int, layout: Layout) -> dict[str, int]:
    """A rank's place in the grid: {dp, pp, cp, tp} (the module docstring's order)."""
    tp_i = rank % layout.tp
    cp_i = (rank // layout.tp) % layout.cp
    dp_i = (rank // (layout.tp * layout.cp)) % layout.dp
    return {"dp": dp_i, "pp": rank // (layout.tp * layout.cp * layout.dp), "cp": cp_i, "tp": tp_i}


def expert_coords(rank: int, layout: Layout) -> dict[str, int]:
    """A rank's place in its stage's (edp, ep) grid (the module docstring's order)."""
    flat = rank % (layout.dp * layout.cp * layout.tp)
    return {"edp": flat // layout.ep, "ep": flat % layout.ep}


def replica_rows(layout: Layout, coords: Mapping[str, int]) -> slice:
    """The rows of the global batch a rank trains on: its data-parallel replica's (the same
    rows whatever the layout; the tp, cp and pp ranks of one replica share them)."""
    first = coords["dp"] * layout.per_replica
    return slice(first, first + layout.per_replica)


def counted_samples(layout: Layout, coords: Mapping[str, int]) -> int:
    """The samples a rank counts per iteration: its replica's on one rank of each replica
    (tp 0 and cp 0 of the last pipeline stage), none elsewhere, so that the sum over ranks
    is the global batch (the method's throughput sums the ranks' samples)."""
    counts = coords["pp"] == layout.pp - 1 and coords["tp"] == 0 and coords["cp"] == 0
    return layout.per_replica if counts else 0


def cp_chunks(layout: Layout, cp_i: int) -> tuple[int, int]:
    """The two of a sequence's 2 x cp equal chunks that context-parallel rank cp_i holds:
    cp_i and 2 cp - 1 - cp_i (an early and a late one: equal causal-attention work)."""
    return cp_i, 2 * layout.cp - 1 - cp_i


def ideal_bubble(layout: Layout) -> float:
    """The pipeline's idle fraction with equal stages and free sends (Narayanan et al., SC'21,
    section 2.2): (pp - 1) / (v m + pp - 1) for m micro-batches and v stages per rank (v = 1
    for GPipe and 1F1B); 0 without a pipeline."""
    pp, m, v = layout.pp, layout.accumulation, layout.virtual_stages
    return (pp - 1) / (v * m + pp - 1)
