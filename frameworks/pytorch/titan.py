"""torchtitan's Llama 3, as the suite builds it from a point's `model` (conf/model/llama3.yaml).

`model_config(cfg)` is torchtitan's own Llama3Model.Config for the point's shape, made with
torchtitan's builders (its llama3 flavours' code path: fused QKV, RMSNorm, SwiGLU of
`ffn_hidden`, complex RoPE with Llama 3.1's scaling, depth-scaled initialisation), so that a
shape set by `model.layers=...` is built the way torchtitan builds its flavours; the named
sizes equal torchtitan's 1B, 8B, 70B and 405B (tests/unit/test_llama3.py).

torchtitan 0.3.0 is installed beside the suite's torch with --no-deps
(requirements-torchtitan.txt); it is imported only here, lazily.
"""
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
    import torch
    with torch.device("meta"):
        model = config.build()
    return config.get_nparams_and_flops(model, seq_len)
