"""Llama 3 on GPUs through torchtitan 0.3.0 (0.2.2 under torch 2.11, which cannot load 0.3.0:
releases.py says which is installed and what each needs, v022.py makes 0.2.2's calls where this
module makes 0.3.0's): its model, its parallelize_llama (tensor and
context parallelism, activation checkpointing, torch.compile, FSDP2 or replicate) and its
pipeline_llm, its initialisation and its loss; the suite's harness times the step
(`TitanSession.step`: one iteration of the global batch, as torchtitan's Trainer.train_step
does it, less its logging), not torchtitan's training loop.

`model_config(cfg)` is torchtitan's own Llama3Model.Config for the point's shape, made with
torchtitan's builders (its llama3 flavours' code path: fused QKV, RMSNorm, SwiGLU of
`ffn_hidden`, complex RoPE with Llama 3.1's scaling, depth-scaled initialisation), so that a
shape set by `model.layers=...` is built the way torchtitan builds its flavours; the named
sizes equal torchtitan's 1B, 8B, 70B and 405B (tests/unit/test_llama3.py).

The point's layout maps onto torchtitan's ParallelismConfig (`parallelism`): dp is
data_parallel_shard_degree with fsdp, else data_parallel_replicate_degree; tp, pp (its
schedule, micro-batches of micro_batch_size), cp; sequence_parallel. Its batch maps onto
TrainingConfig: local_batch_size = micro (x accumulation with a pipeline, whose micro-batches
torchtitan makes), global_batch_size = global. AMP bf16 is FSDP's mixed precision (bf16
parameters, fp32 reduction), torchtitan's way; `model.recompute` is its full activation
checkpointing; `compile` its per-block torch.compile. The tokens are the GPT's synthetic rows
(the same for a seed whatever the layout), given as torchtitan's data loader gives them
({input, positions}, labels).

torchtitan's Trainer class is not used: its module imports tensorboard, datasets and
huggingface_hub (its data and logging), which the suite does not install; the step repeats
the ten lines of its train_step and post_dataloading_process that matter (attention masks from
the positions, the context-parallel split, the spmd_types annotations, forward, loss over the
global batch's tokens, backward, clipping at 1.0, the optimizer).

Not run yet: this machine has no GPU, and torchtitan takes a CUDA device even where there is
none (torchtitan.tools.utils: device_type "cuda"); the mapping of a point onto torchtitan's
configs is checked here against torchtitan's own validation (tests/unit/test_llama3.py), and
frameworks/pytorch/models/llama3.py trains the same definition on the CPU. torchtitan is installed
beside the suite's torch with --no-deps (requirements-torchtitan.txt) and imported lazily.
"""
import functools
import inspect
import shutil
import tempfile
import types
from typing import Any

import torch

from frameworks.common import capability
from contract import parallel, versions
from frameworks.pytorch import ADAPTER, models
from frameworks.pytorch.layouts import parallelize
from frameworks.pytorch.models import gpt
from frameworks.pytorch.session import TorchSession, setup_device
from frameworks.pytorch.titan import releases
from frameworks.pytorch.titan.settings import SPMD_BACKEND, batch_settings, parallelism_settings
from frameworks.registry import resolve

FLAVOURS = {"1b": "1B", "8b": "8B", "70b": "70B", "405b": "405B"}  # our size -> torchtitan's flavour


def model_config(cfg: dict, attn_backend: str = "flex"):
    """torchtitan's Llama3Model.Config of a point's Llama 3 shape."""
    from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
    from torchtitan.models.llama3 import _build_llama3_layers, _EMBEDDING_INIT, _EMBEDDING_SKIP_INIT
    from torchtitan.models.llama3 import _NORM_INIT, _output_linear_init
    from torchtitan.models.llama3.model import Llama3Model

    dim, vocab, tied = cfg["hidden"], cfg["vocab_size"], bool(cfg.get("tie_embeddings"))
    scaling = cfg.get("rope_scaling") or {}
    rope = ComplexRoPE.Config(
        dim=dim // cfg["heads"], max_seq_len=max(131072, cfg["seq_len"]), theta=cfg["rope_theta"],
        scaling="llama" if scaling else "none",
        **({"scaling_factor": scaling["factor"], "low_freq_factor": scaling["low_freq_factor"],
            "high_freq_factor": scaling["high_freq_factor"],
            "original_max_position_embeddings": scaling["original_max_position_embeddings"]}
           if scaling else {}))
    layers = _build_llama3_layers(n_layers=cfg["layers"], dim=dim, n_heads=cfg["heads"],
                                  n_kv_heads=cfg["kv_heads"], hidden_dim=cfg["ffn_hidden"],
                                  rope=rope, fuse_qkv=True, attn_backend=attn_backend)
    for layer in layers:
        layer.attention_norm.eps = layer.ffn_norm.eps = cfg.get("norm_eps", 1e-5)
    return Llama3Model.Config(
        dim=dim, vocab_size=vocab, enable_weight_tying=tied,
        tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim,
                                        param_init=_EMBEDDING_SKIP_INIT if tied else _EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=dim, eps=cfg.get("norm_eps", 1e-5), param_init=_NORM_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab, param_init=_output_linear_init(dim)),
        layers=layers)


def parameters_and_flops(config, seq_len: int) -> tuple:
    """(parameters, training FLOPs per token) as torchtitan counts them, from a meta build."""
    with torch.device("meta"):
        model = config.build()
    return config.get_nparams_and_flops(model, seq_len)


FLEX_BLOCK = 128   # FlexAttention's block: its context parallelism splits the sequence by it
def configs(spec, layout) -> dict:
    """torchtitan's configs of a point (module docstring): parallelism, training (its batch,
    sequence and mixed precision), compile and activation checkpointing, as parallelize_llama
    and pipeline_llm take them."""
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed.activation_checkpoint import FullAC

    cfg, amp = spec.model, spec.precision == "amp"
    return {"parallelism": ParallelismConfig(**parallelism_settings(layout)),
            "training": TrainingConfig(**batch_settings(layout), seq_len=cfg["seq_len"], max_norm=1.0,
                                       mixed_precision_param="bfloat16" if amp else "float32",
                                       mixed_precision_reduce="float32"),
            "compile_config": CompileConfig(enable=bool(spec.compile), components=["model", "loss"]),
            "ac_config": FullAC.Config() if cfg.get("recompute") else None}


def gap(spec, layout):
    """Why torchtitan cannot train this point, or None; decided before anything is built."""
    if spec.precision == "amp" and spec.amp_dtype == "fp16":
        return ("torchtitan trains Llama 3 in bf16 (FSDP's mixed precision), not fp16: use "
                "precision.amp_dtype=bf16")
    if layout.pp > 1 and spec.model.get("tie_embeddings"):
        return "torchtitan does not pipeline a model whose output is tied to its embedding (1B)"
    seq = spec.model.seq_len
    if layout.cp > 1 and seq % (layout.cp * FLEX_BLOCK):
        return (f"torchtitan's context parallelism (FlexAttention) needs the sequence a multiple of "
                f"cp x {FLEX_BLOCK}: {seq} % ({layout.cp} x {FLEX_BLOCK}) = {seq % (layout.cp * FLEX_BLOCK)}")
    return None




class TitanSession(TorchSession):
    """One rank of a Llama 3 point on GPUs (module docstring)."""

    def __init__(self, spec, dist):
        self.dist, self.layout = dist, spec.parallel
        self.device, self.cuda = setup_device(spec, dist, group=True)  # torchtitan reuses the group
        why = self._gap(spec)
        if why:
            raise capability.Unsupported(why)
        self.titan = self._titan()
        self.titan_configs = self._configs(spec)
        self._mesh(spec)
        model = self._model(spec)
        self._parts(model)
        self.optimizer = models.build_optimizer(spec.model, self.params)
        self._after_optimizer()
        self.coords = parallel.coords(dist.rank, self.layout)   # torchtitan's order too: pp, dp, cp, tp
        self._batches(spec.model, self.layout, spec.seed)
        self.counts = {"model": self._parameters(spec.model.seq_len),
                       "held": sum(parallelize.local(p).numel() for p in self.params)}

    # ---- construction, in order ---------------------------------------------------------
    def _mesh(self, spec):
        """torchtitan's ParallelDims and device mesh, its SPMD context, its seeds."""
        dist_utils, parallelism = self.titan.dist_utils, self.titan_configs["parallelism"]
        dist_utils.set_spmd_backend(parallelism.spmd_backend)   # as its Trainer does first
        self.dims = self.titan.ParallelDims.from_config(parallelism, self.dist.world_size)
        self.dims.build_mesh()
        self.context = dist_utils.get_spmd_context(parallel_dims=self.dims)
        # one seed on every rank but the pipeline's (its Trainer's call): replicas start equal
        dist_utils.set_determinism(self.dims, self.device, self.titan.DebugConfig(seed=spec.seed),
                                   distinct_seed_mesh_dims=["pp"])

    # ---- what a model family changes (frameworks/pytorch/titan/moe_session.py: DeepSeek-V3), ----
    # ---- and what torchtitan 0.2.2 calls otherwise (v022.py) --------------------------------------
    def _titan(self):
        return _torchtitan()

    def _gap(self, spec):
        return gap(spec, self.layout)

    def _configs(self, spec):
        return configs(spec, self.layout)

    def _config(self, spec):
        """torchtitan's model config of the point's shape, with its sharding declarations."""
        config = model_config(spec.model)
        # what Llama3Model.Config.update_from_config does for a layout (its Decoder base
        # imports torchtitan's Trainer, and with it datasets and tensorboard): the sharding
        # declarations, sequence parallel or not; the heads' relations are parallel.py's
        self.titan.set_llama3_sharding_config(
            config, enable_sp=self.titan_configs["parallelism"].enable_sequence_parallel)
        return config

    def _parallelize_fn(self):
        return self.titan.parallelize_llama

    def _parameters(self, seq_len: int) -> int:
        return parameters_and_flops(self.config, seq_len)[0]

    def _loss(self, pred, labels, extra):
        """This micro-batch's loss: its tokens' part of the global batch's mean."""
        return self.loss_fn(pred, labels, self.tokens, positions=extra["positions"])[0]

    def _pipeline_loss_kwargs(self) -> dict:
        return {"global_valid_tokens": self.tokens}

    def _pipeline_loss(self, losses):
        """The last stage's loss of its micro-batches' (each already its part of the mean)."""
        return torch.sum(torch.stack([parallelize.local(x).float() for x in losses])).to(self.device)

    def _after_optimizer(self):
        """What torchtitan's trainer hangs on the optimizer (nothing for Llama 3)."""

    # ---- construction, continued ------------------------------------------------------------
    def _model(self, spec):
        """torchtitan's model of the point's shape, on the meta device, and its loss."""
        self.config = self._config(spec)
        with torch.device("meta"):
            model = self.config.build()
        loss = self.titan.CrossEntropyLoss
        self.loss_fn = loss(loss.Config(global_vocab_size=spec.model.vocab_size),
                            compile_config=self.titan_configs["compile_config"])
        return model

    def _parts(self, model):
        """parallelize_llama, through pipeline_llm with a pipeline; each part made and
        initialised on the device."""
        self.dump = tempfile.mkdtemp(prefix="dlbench-torchtitan-")
        common = dict(parallel_dims=self.dims, dump_folder=self.dump, **self.titan_configs)
        if self.layout.pp > 1:
            self.schedule, self.parts, self.first, self.last = self.titan.pipeline_llm(
                model, device=self.device, model_config=self.config,
                parallelize_fn=self._parallelize_fn(), loss_fn=self.loss_fn, **common)
        else:
            self.schedule, self.first, self.last = None, True, True
            self.parts = [self._parallelize_fn()(model, **common)]
        self._materialize(self.titan_configs["training"].max_norm)

    def _materialize(self, max_norm) -> None:
        """Each part made and initialised on the device, in training mode (either release's)."""
        for part in self.parts:
            part.to_empty(device=self.device)
            with torch.no_grad():
                part.init_weights(buffer_device=None)
            part.train()
        self.params = [p for part in self.parts for p in part.parameters()]
        self.max_norm, self.dist_utils = max_norm, self.titan.dist_utils

    def _batches(self, cfg, layout, seed):
        """This data-parallel rank's rows of the global batch (the GPT's synthetic rule), as
        torchtitan's data loader gives them: ({input, positions}, labels) per micro-batch."""
        n, m = layout.micro_batch_size, layout.accumulation
        rows = gpt.synthetic_tokens(cfg, layout.global_batch_size, seed)
        rows = rows[parallel.replica_rows(layout, self.coords)].to(self.device)
        positions = torch.arange(cfg.seq_len, device=self.device).expand(n, -1)
        self.micro = [({"input": rows[i * n:(i + 1) * n, :-1], "positions": positions},
                       rows[i * n:(i + 1) * n, 1:]) for i in range(m)]
        self.tokens = torch.tensor(layout.global_batch_size * cfg.seq_len, device=self.device)
        self.samples_per_step = parallel.counted_samples(layout, self.coords)

    def _prepare(self, input_dict, labels):
        """torchtitan's post_dataloading_process: attention masks from the positions, the
        context-parallel split (and the spmd_types annotations under that backend)."""
        from torchtitan.distributed.context_parallel import prepare_context_parallel_input
        from torchtitan.distributed.spmd_types import annotate_input_spmd_types

        extra = {"positions": input_dict["positions"],
                 "attention_masks": self.parts[0].get_attention_masks(positions=input_dict["positions"])}
        inputs = input_dict["input"]
        if self.dims.cp_enabled:
            inputs, labels, extra = prepare_context_parallel_input(
                inputs, labels, extra, self.dims.get_mesh("cp"), self.device, "headtail", None)
        if SPMD_BACKEND == "spmd_types":
            return annotate_input_spmd_types(self.dims, inputs, labels, extra)
        return inputs, labels, extra

    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        if self.schedule is not None:
            loss = self._pipeline()
        else:
            loss = torch.zeros((), device=self.device)
            for input_dict, labels in self.micro:
                inputs, labels, extra = self._prepare(input_dict, labels)
                with self.context():
                    out = self._loss(self.parts[0](inputs, **extra), labels, extra)
                    out.backward()
                loss = loss + parallelize.local(out.detach()).float()
        self.dist_utils.clip_grad_norm_(self.params, self.max_norm, foreach=True,
                                        pp_mesh=self.dims.get_optional_mesh("pp"),
                                        ep_enabled=self.dims.ep_enabled)
        self.optimizer.step()
        if self.dims.dp_cp_enabled:   # each rank's loss is its tokens' part of the global mean
            torch.distributed.all_reduce(loss, group=self.dims.get_mesh("loss").get_group())
        if self.schedule is not None:
            torch.distributed.broadcast(loss, group=self.dims.get_mesh("pp").get_group(),
                                        group_src=self.layout.pp - 1)
        return loss

    def _pipeline(self):
        prepared = [self._prepare(x, y) for x, y in self.micro]
        losses = [] if self.last else None
        with self.context():
            microbatches(self.schedule, arg_mbs=[(i,) for i, _, _ in prepared] if self.first else None,
                         kwarg_mbs=[e for _, _, e in prepared],
                         target_mbs=[y for _, y, _ in prepared] if self.last else None,
                         losses=losses, loss_kwargs=self._pipeline_loss_kwargs(),
                         return_outputs=False)
        if self.last:
            return self._pipeline_loss(losses)
        return torch.zeros((), device=self.device)

    implementation_reason = None   # why this path ran (`choose`)

    def parallel_record(self) -> dict:
        return {"layout": self.layout.as_dict(), "coords": self.coords, "parameters": self.counts,
                "implementation": f"torchtitan {_version()} ({self._parallelize_fn().__name__}"
                                  + (", pipeline_llm)" if self.layout.pp > 1 else ")"),
                "implementation_reason": self.implementation_reason}

    def parameter_checksum(self):
        return parallelize.checksum(self.params)

    def close(self):
        shutil.rmtree(self.dump, ignore_errors=True)
        super().close()


def _torchtitan():
    """torchtitan's parts this session uses, or Unsupported where it does not import."""
    try:
        return _import_torchtitan()
    except ImportError as exc:
        raise capability.Unsupported(
            f"torchtitan is not importable in this environment ({exc}): install it with "
            "pip install --no-deps -r requirements-torchtitan.txt") from None


def _import_torchtitan():
    from torchtitan.components.loss import CrossEntropyLoss
    from torchtitan.config import DebugConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.distributed.pipeline_parallel import pipeline_llm
    from torchtitan.models.llama3 import parallelize_llama
    from torchtitan.models.llama3.sharding import set_llama3_sharding_config
    return types.SimpleNamespace(
        CrossEntropyLoss=CrossEntropyLoss, DebugConfig=DebugConfig, ParallelDims=ParallelDims,
        dist_utils=dist_utils, pipeline_llm=pipeline_llm, parallelize_llama=parallelize_llama,
        set_llama3_sharding_config=set_llama3_sharding_config)


def unavailable(family: Any = None) -> str | None:
    """Why torchtitan cannot train here, or None: it is not installed, it is older than any
    release driven here, this torch is older than its release needs (0.3.0 with torch 2.11), or
    what its path imports does not load (releases.py: the release's imports, and a mixture of
    experts' parallelize function; `family`: its module (frameworks/pytorch/models/), None for
    Llama 3)."""
    try:
        version = _version()
    except Exception:  # noqa: BLE001 (importlib.metadata's PackageNotFoundError)
        return "torchtitan is not installed (requirements-torchtitan.txt)"
    where = f"torchtitan {version} with torch {torch.__version__}"
    release = releases.of(version)
    if release is None:
        return f"{where}: it is older than {releases.RELEASES[-1].version}, the oldest driven here"
    too_old = releases.torch_gap(release, torch.__version__)
    if too_old:
        return f"{where} does not load ({too_old})"
    return _loads(release, family)


@functools.lru_cache(maxsize=None)
def _loads(release, family):
    try:
        for ref in release.imports + release.references(family):
            resolve(ref)
    except Exception as exc:  # noqa: BLE001 (an import that fails, whatever it raises)
        return (f"torchtitan {_version()} with torch {torch.__version__} does not load "
                f"({type(exc).__name__}: {str(exc).splitlines()[0]})")
    return None


def choose(spec, family=None):
    """(whether a point trains through torchtitan, the reason, for its record): torchtitan where
    its ranks have GPUs (device cuda, or auto with a GPU), the adapter's releases `when=TORCHTITAN`
    hold (contract/versions.py) and the torch the installed release needs (releases.py), it
    loads (`unavailable`) and builds the family, else the family's own definition with torch's
    FSDP2, TP, PP, CP and EP (frameworks/pytorch/lm_session.py), on the GPU or the CPU."""
    if not (spec.device == "cuda" or (spec.device == "auto" and torch.cuda.is_available())):
        return False, "a CPU rank: torchtitan's path is the GPU's (its FlexAttention has no CPU backward)"
    own = "the suite's own definition on the GPU, with torch's FSDP2, TP, PP, CP and EP"
    found = versions.found(ADAPTER.releases)
    release = releases.of(found["torchtitan"]) if found.get("torchtitan") else None
    needs = releases.torch_gap(release, found["torch"]) if release and found.get("torch") else None
    too_old = versions.gaps(ADAPTER.releases, found, {versions.TORCHTITAN}) + ([needs] if needs else [])
    if too_old:
        return False, f"{'; '.join(too_old)}: {own}"
    why = unavailable(family)
    if why is None and release.builds_not(spec, family):
        why = f"torchtitan {_version()} {release.builds_not(spec, family)}"
    if why:
        return False, f"{why}: {own}"
    return True, f"torchtitan {_version()} loads with torch {torch.__version__}"


def session(family, spec, dist, titan_class):
    """A language model's session: `titan_class` (torchtitan's, through v022.py's calls where
    0.2.2 is installed) or the family's own (lm_session), as `choose` decides; the session's
    record gives the reason."""
    from frameworks.pytorch import lm_session
    use, why = choose(spec, family)
    cls = for_release(titan_class, releases.current()) if use else lm_session.session_of(family)
    return type(cls.__name__, (cls,), {"implementation_reason": why})(spec, dist)


def for_release(titan_class, release):
    """`titan_class` as the installed release is driven: 0.3.0's calls, or 0.2.2's (v022.py)."""
    if release is releases.V022:
        from frameworks.pytorch.titan import v022
        return type(titan_class.__name__, (v022.Titan022, titan_class), {})
    return titan_class


def microbatches(schedule, loss_kwargs=None, **microbatched) -> None:
    """One pipeline step over micro-batches already split, as torchtitan's trainer calls its
    schedule (`step(arg_mbs=..., kwarg_mbs=..., target_mbs=..., loss_kwargs=...)`, a newer
    torch's). Where `step` splits whole inputs itself (torch 2.11, 2.13), the schedule's inner
    `_step_microbatches` runs after what the public `step` does first (torch's
    pipelining/schedules.py, both step methods): each stage told whether the schedule runs a
    backward (a PipelineStage starts with has_backward False, and then its backward_one_chunk
    returns at once: forward only, no gradient) and its runtime states cleared. `loss_kwargs`
    (the global batch's token count) go to the loss: through `_step_microbatches` where it
    takes them (2.13), else bound to the schedule's loss for this step (2.11's has no such
    parameter and calls loss_fn(output, target))."""
    if _takes(type(schedule).step, "arg_mbs"):
        schedule.step(loss_kwargs=loss_kwargs, **microbatched)
        return
    for stage in getattr(schedule, "_stages", None) or [schedule._stage]:
        stage.has_backward = schedule._has_backward
        stage.clear_runtime_states()
    if not loss_kwargs or _takes(type(schedule)._step_microbatches, "loss_kwargs"):
        schedule._step_microbatches(**microbatched, **({"loss_kwargs": loss_kwargs} if loss_kwargs else {}))
        return
    loss_fn = schedule._loss_fn
    schedule._loss_fn = functools.partial(loss_fn, **loss_kwargs)
    try:
        schedule._step_microbatches(**microbatched)
    finally:
        schedule._loss_fn = loss_fn


@functools.lru_cache(maxsize=None)   # asked once per schedule class, not every timed step
def _takes(method, parameter: str) -> bool:
    return parameter in inspect.signature(method).parameters


def _version() -> str:
    from importlib.metadata import version
    return version("torchtitan")
