"""Mixtures of experts on GPUs through torchtitan 0.3.0 (DeepSeek-V3, Qwen3's MoE): its model,
its parallelize function (parallelize_deepseekv3, parallelize_qwen3: tensor, context and expert
parallelism, activation checkpointing, torch.compile, FSDP2 of the dense parts over dp_shard x
cp and of the experts over efsdp), pipeline_llm with a pipeline, its token dispatch backend and
its load-balancing hook; frameworks/pytorch/titan.py's TitanSession does the rest (the mesh,
the batches, the step, its loss over the global batch's tokens, clipping at 1.0).

`model_config(cfg)` is torchtitan's own model config for the point's shape, made by its
builders (DeepSeek-V3: `_build_dsv3_layers`, MLA, `dense_layers` dense SwiGLU layers then MoE
layers; Qwen3: `_build_qwen3_moe_layers`; their initialisation) with `moe_comm_backend` = the
point's `model.dispatch`:
- standard: torch.distributed's all-to-all (torchtitan's AllToAllTokenDispatcher), the one
  the CPU definition (frameworks/pytorch/moe.py) does too;
- deepep, hybridep: DeepEP's kernels (NVSHMEM, NVLink / GB200 NVL72), where the `deep_ep`
  package is installed (the suite does not install it); their buffers are sized for a
  rank's tokens of one micro-batch.
The named sizes equal torchtitan's flavours (tests/unit/test_deepseek_v3.py, test_qwen3_moe.py).

The layout maps onto torchtitan's ParallelismConfig as for Llama 3 (titan.py), with
expert_parallel_degree = ep. torchtitan's experts borrow their ranks from FSDP's (its mesh
rule dp_shard x cp x tp = efsdp x ep), so an expert-parallel point without FSDP, whose dp is
torchtitan's dp_replicate, runs only where ep divides cp x tp; elsewhere it is `unsupported`
with that line (set parallel.fsdp=true), decided before the model is built.

Not run yet: no GPU was lent to the sessions that built this (docs/moe.md).
"""
import importlib.util
import re

from frameworks.pytorch import titan

FLAVOURS = {"16b": "16B", "671b": "671B", "30b_a3b": "30B-A3B", "235b_a22b": "235B-A22B"}  # ours -> torchtitan's
# model -> (its sharding declarations, its parallelize function), by module and name
TORCHTITAN = {"deepseek_v3": (("torchtitan.models.deepseek_v3.sharding", "set_deepseek_v3_sharding_config"),
                              ("torchtitan.models.deepseek_v3", "parallelize_deepseekv3")),
              "qwen3_moe": (("torchtitan.models.qwen3.sharding", "set_qwen3_sharding_config"),
                            ("torchtitan.models.qwen3", "parallelize_qwen3"))}
DISPATCH = {"standard": None, "deepep": "deep_ep", "hybridep": "deep_ep"}   # -> the module it needs


def tokens_per_rank(cfg: dict, layout) -> int:
    """A rank's tokens in one micro-batch: DeepEP's buffer bound (split over tp with ep)."""
    tokens = layout.micro_batch_size * cfg["seq_len"] // layout.cp
    return tokens // layout.tp if layout.ep > 1 else tokens


def model_config(cfg: dict, attn_backend: str = "flex", max_tokens=None):
    """torchtitan's model config of a point's mixture of experts (module docstring), its MoE
    layers' load balancing the point's; `max_tokens`: the DeepEP dispatchers' per-rank bound."""
    config = (_qwen3 if cfg["name"] == "qwen3_moe" else _deepseek_v3)(cfg, attn_backend)
    for layer in config.layers:
        if layer.moe is not None:
            layer.moe.load_balance_coeff = cfg.get("load_balance_coeff")
            dispatcher = layer.moe.routed_experts.token_dispatcher
            if max_tokens is not None and hasattr(dispatcher, "num_max_tokens_per_rank"):
                dispatcher.num_max_tokens_per_rank = max_tokens
    return config


def _qwen3(cfg: dict, attn_backend: str):
    from torchtitan.models.common import CosSinRoPE, Embedding, Linear
    from torchtitan.models.qwen3 import _EMBEDDING_INIT, _LINEAR_INIT, _build_qwen3_moe_layers, _qwen3_norm
    from torchtitan.models.qwen3.model import Qwen3Model

    dim, vocab, head_dim = cfg["hidden"], cfg["vocab_size"], cfg["head_dim"]
    layers = _build_qwen3_moe_layers(
        n_layers=cfg["layers"], dim=dim, n_heads=cfg["heads"], n_kv_heads=cfg["kv_heads"], head_dim=head_dim,
        moe_hidden_dim=cfg["moe_hidden"], num_experts=cfg["experts"], top_k=cfg["top_k"], fuse_qkv=True,
        attn_backend=attn_backend, moe_comm_backend=cfg.get("dispatch", "standard"),
        rope=CosSinRoPE.Config(dim=head_dim, max_seq_len=max(40960, cfg["seq_len"]), theta=cfg["rope_theta"]))
    return Qwen3Model.Config(
        vocab_size=vocab, dim=dim, norm=_qwen3_norm(dim), layers=layers,
        tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim, param_init=_EMBEDDING_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab, param_init=_LINEAR_INIT))


def _deepseek_v3(cfg: dict, attn_backend: str):
    from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
    from torchtitan.models.deepseek_v3 import (_EMBEDDING_INIT, _NORM_INIT, _build_dsv3_layers,
                                               _output_linear_init)
    from torchtitan.models.deepseek_v3.model import DeepSeekV3Model

    dim, vocab, yarn = cfg["hidden"], cfg["vocab_size"], cfg.get("rope_scaling") or {}
    rope = ComplexRoPE.Config(
        dim=cfg["qk_rope_head_dim"], max_seq_len=max(16384, cfg["seq_len"]), theta=cfg["rope_theta"],
        scaling="yarn" if yarn else "none", rope_factor=yarn.get("factor", 1.0),
        beta_fast=yarn.get("beta_fast", 32.0), beta_slow=yarn.get("beta_slow", 1.0),
        original_seq_len=yarn.get("original_seq_len", 4096))
    layers = _build_dsv3_layers(
        n_layers=cfg["layers"], n_dense_layers=cfg["dense_layers"], dim=dim, n_heads=cfg["heads"],
        q_lora_rank=cfg["q_lora_rank"], kv_lora_rank=cfg["kv_lora_rank"],
        qk_nope_head_dim=cfg["qk_nope_head_dim"], qk_rope_head_dim=cfg["qk_rope_head_dim"],
        v_head_dim=cfg["v_head_dim"], mscale=cfg["mscale"], dense_hidden_dim=cfg["ffn_hidden"],
        moe_hidden_dim=cfg["moe_hidden"], num_experts=cfg["experts"],
        num_shared_experts=cfg["shared_experts"], router_top_k=cfg["top_k"],
        router_score_func=cfg["score_func"], router_num_expert_groups=cfg.get("expert_groups"),
        router_num_limited_groups=cfg.get("limited_groups"),
        router_route_scale=cfg.get("route_scale", 1.0), router_route_norm=bool(cfg.get("route_norm")),
        attn_backend=attn_backend, moe_comm_backend=cfg.get("dispatch", "standard"),
        non_blocking_capacity_factor=None, rope=rope)
    eps = cfg.get("norm_eps", 1e-5)
    for layer in layers:
        for norm in (layer.attention_norm, layer.ffn_norm, layer.attention.kv_norm, layer.attention.q_norm):
            norm.eps = eps
    return DeepSeekV3Model.Config(
        vocab_size=vocab, dim=dim, layers=layers, mtp_layers=[],
        tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim, param_init=_EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=dim, eps=eps, param_init=_NORM_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab, param_init=_output_linear_init(dim)))


def torchtitan_name(model: str, ours: str) -> str:
    """torchtitan's name of a parameter or buffer of the CPU definition (frameworks/pytorch/
    deepseek_v3.py, qwen3_moe.py): the state dict of one loads into the other."""
    name = ours.replace("embed.weight", "tok_embeddings.weight").replace("head.norm", "norm")
    name = name.replace("head.output", "lm_head").replace("expert_bias", "expert_bias_E")
    name = name.replace("tokens_per_expert", "tokens_per_expert_E")
    if model == "qwen3_moe":   # its fused projection's parts
        name = re.sub(r"attention\.(w[qkv])\.", r"attention.qkv_linear.\1.", name)
    return re.sub(r"moe\.experts\.(w[123])$",
                  lambda m: f"moe.routed_experts.inner_experts.{m[1]}_{'EDF' if m[1] == 'w2' else 'EFD'}", name)


def gap(spec, layout):
    """Why torchtitan cannot train this DeepSeek-V3 point, or None (titan.gap's, then the
    experts': torchtitan's mesh rule with our data-parallel mapping, the dispatch backend)."""
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
    if needs and importlib.util.find_spec(needs) is None:
        return (f"model.dispatch={dispatch} needs DeepEP (the {needs} package), which is not "
                "installed in this environment")
    return None


class TitanMoESession(titan.TitanSession):
    """One rank of a mixture of experts' point on GPUs (module docstring)."""

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
        self.model_name = spec.model["name"]
        config = model_config(spec.model, max_tokens=tokens_per_rank(spec.model, self.layout))
        # what the model config's update_from_config does for a layout (titan.py says why not it)
        _torchtitan(spec.model["name"], 0)(
            config, enable_sp=self.titan_configs["parallelism"].enable_sequence_parallel,
            enable_ep=self.layout.ep > 1)
        return config

    def _parallelize_fn(self):
        return _torchtitan(self.model_name, 1)

    def _after_optimizer(self):
        """torchtitan's auxiliary-loss-free load balancing: its expert-bias update, before each
        optimizer step (a torch optimizer's step pre-hook, as on its container)."""
        from torchtitan.components.optimizer import register_moe_load_balancing_hook
        register_moe_load_balancing_hook(self.optimizer, self.parts, self.dims)



def _torchtitan(model: str, which: int):
    """torchtitan's sharding declarations (0) or parallelize function (1) of a model."""
    import importlib
    module, name = TORCHTITAN[model][which]
    return getattr(importlib.import_module(module), name)
