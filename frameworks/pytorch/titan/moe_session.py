"""Mixtures of experts on GPUs through torchtitan 0.3.0 (DeepSeek-V3, Qwen3's MoE): its model,
its parallelize function (parallelize_deepseekv3, parallelize_qwen3: tensor, context and expert
parallelism, activation checkpointing, torch.compile, FSDP2 of the dense parts over dp_shard x
cp and of the experts over efsdp), pipeline_llm with a pipeline, its token dispatch backend and
its load-balancing hook; frameworks/pytorch/titan/session.py's TitanSession does the rest (the mesh,
the batches, the step, its loss over the global batch's tokens, clipping at 1.0).

`model_config(cfg, family)` is torchtitan's own model config for the point's shape, made by its
builders (the family module's `titan_config`: DeepSeek-V3's `_build_dsv3_layers`, MLA,
`dense_layers` dense SwiGLU layers then MoE layers; Qwen3's `_build_qwen3_moe_layers`; their
initialisation) with `moe_comm_backend` = the point's `model.dispatch`; the family names
torchtitan's sharding declarations and parallelize function (`TITAN_SHARDING`,
`TITAN_PARALLELIZE`) and its flavours (`TITAN_FLAVOURS`):
- standard: torch.distributed's all-to-all (torchtitan's AllToAllTokenDispatcher), the one
  the CPU definition (frameworks/pytorch/models/moe.py) does too;
- deepep, hybridep: DeepEP's kernels (NVSHMEM, NVLink / GB200 NVL72), where the `deep_ep`
  package is installed (the suite does not install it); their buffers are sized for a
  rank's tokens of one micro-batch.
The named sizes equal torchtitan's flavours (tests/unit/test_deepseek_v3.py, test_qwen3_moe.py).

The layout maps onto torchtitan's ParallelismConfig as for Llama 3 (session.py), with
expert_parallel_degree = ep. torchtitan's experts borrow their ranks from FSDP's (its mesh
rule dp_shard x cp x tp = efsdp x ep), so an expert-parallel point without FSDP, whose dp is
torchtitan's dp_replicate, runs only where ep divides cp x tp; elsewhere it is `unsupported`
with that line (set parallel.fsdp=true), decided before the model is built.

Not run yet: no GPU was lent to the sessions that built this (docs/moe.md).
"""
import importlib.util
import re
from typing import Any

from frameworks.pytorch.titan import session as titan
from frameworks.registry import resolve

DISPATCH = {"standard": None, "deepep": "deep_ep", "hybridep": "deep_ep"}   # -> the module it needs


def tokens_per_rank(cfg: dict, layout) -> int:
    """A rank's tokens in one micro-batch: DeepEP's buffer bound (split over tp with ep)."""
    tokens = layout.micro_batch_size * cfg["seq_len"] // layout.cp
    return tokens // layout.tp if layout.ep > 1 else tokens


def model_config(cfg: dict, family, attn_backend: str = "flex", max_tokens=None):
    """torchtitan's model config of a point's mixture of experts (module docstring), its MoE
    layers' load balancing the point's; `max_tokens`: the DeepEP dispatchers' per-rank bound."""
    config = family.titan_config(cfg, attn_backend)
    for layer in config.layers:
        if layer.moe is not None:
            layer.moe.load_balance_coeff = cfg.get("load_balance_coeff")
            dispatcher = layer.moe.routed_experts.token_dispatcher
            if max_tokens is not None and hasattr(dispatcher, "num_max_tokens_per_rank"):
                dispatcher.num_max_tokens_per_rank = max_tokens
    return config


def torchtitan_name(family, ours: str) -> str:
    """torchtitan's name of a parameter or buffer of a family's CPU definition (its module,
    `family`): the state dict of one loads into the other."""
    name = ours.replace("embed.weight", "tok_embeddings.weight").replace("head.norm", "norm")
    name = name.replace("head.output", "lm_head").replace("expert_bias", "expert_bias_E")
    name = name.replace("tokens_per_expert", "tokens_per_expert_E")
    if getattr(family, "TITAN_FUSED_QKV", False):   # its fused projection's parts
        name = re.sub(r"attention\.(w[qkv])\.", r"attention.qkv_linear.\1.", name)
    return re.sub(r"moe\.experts\.(w[123])$",
                  lambda m: f"moe.routed_experts.inner_experts.{m[1]}_{'EDF' if m[1] == 'w2' else 'EFD'}", name)


def gap(spec, layout):
    """Why torchtitan cannot train this DeepSeek-V3 point, or None (titan.gap's, then the
    experts': torchtitan's mesh rule with our data-parallel mapping, the dispatch backend and
    its need of ep > 1)."""
    why = titan.gap(spec, layout)
    if why:
        return why
    shard = layout.dp if layout.fsdp else 1
    if layout.ep > 1 and (shard * layout.cp * layout.tp) % layout.ep:
        return (f"torchtitan's experts borrow FSDP's ranks (dp_shard x cp x tp = efsdp x ep): "
                f"without parallel.fsdp dp_shard is 1, and ep = {layout.ep} does not divide cp x tp = "
                f"{layout.cp * layout.tp}; set parallel.fsdp=true")
    dispatch = spec.model.get("dispatch", "standard")
    if dispatch not in DISPATCH:
        return f"model.dispatch must be one of {', '.join(DISPATCH)}, got {dispatch!r}"
    needs = DISPATCH[dispatch]
    if needs and layout.ep == 1:   # torchtitan's update_ep_token_dispatcher_config refuses it
        return (f"model.dispatch={dispatch} (DeepEP's kernels) dispatches to experts on other ranks: "
                "it needs expert parallelism, parallel.ep > 1")
    if needs and importlib.util.find_spec(needs) is None:
        return (f"model.dispatch={dispatch} needs DeepEP (the {needs} package), which is not "
                "installed in this environment")
    return None


def session(family, spec, dist):
    """A mixture of experts' session: torchtitan's where the point takes its GPU path, else the
    family's own definition (frameworks/pytorch/lm_session.py), as titan.choose decides."""
    return titan.session(family, spec, dist, session_of(family))


def session_of(family) -> type:
    """TitanMoESession of one family module."""
    return type(f"Titan{family.__name__.rsplit('.', 1)[-1].capitalize()}Session", (TitanMoESession,),
                {"family": family})


class TitanMoESession(titan.TitanSession):
    """One rank of a mixture of experts' point on GPUs (module docstring); `family` its
    model's module (session_of)."""

    family: Any = None

    def _gap(self, spec):
        return gap(spec, self.layout)

    def _configs(self, spec):
        """titan.configs; with ep and tp, torchtitan's sequence parallelism on (its default):
        without it, its MoE hands its routed experts' output (Shard(1)) to a redistribution to
        Partial, which torch 2.13 refuses ("redistributing to Partial is for internal use
        only", seen on the CPU)."""
        out = titan.configs(spec, self.layout)
        if self.layout.ep > 1 and self.layout.tp > 1:
            out["parallelism"].enable_sequence_parallel = True
        return out

    def _config(self, spec):
        config = model_config(spec.model, self.family, max_tokens=tokens_per_rank(spec.model, self.layout))
        # what the model config's update_from_config does for a layout (session.py says why not it)
        resolve(self.family.TITAN_SHARDING)(
            config, enable_sp=self.titan_configs["parallelism"].enable_sequence_parallel,
            enable_ep=self.layout.ep > 1)
        return config

    def _parallelize_fn(self):
        return resolve(self.family.TITAN_PARALLELIZE)

    def _after_optimizer(self):
        """torchtitan's auxiliary-loss-free load balancing: its expert-bias update, before each
        optimizer step (a torch optimizer's step pre-hook, as on its container)."""
        from torchtitan.components.optimizer import register_moe_load_balancing_hook
        register_moe_load_balancing_hook(self.optimizer, self.parts, self.dims)
