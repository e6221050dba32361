"""Qwen3's mixtures of experts: parameter counts and activated FLOPs by hand, and the CPU
definition (frameworks/pytorch/models/qwen3_moe.py) against torchtitan's own qwen3 MoE flavours: the
same parameters and FLOPs, the same logits from the same weights."""

import pytest
import torch

from analysis.figures import flops
from contract.models import qwen3_moe as qwen3_moe_spec
from frameworks.pytorch.layouts import parallelize
from frameworks.pytorch.models import qwen3_moe
from tests.frameworks_env import model_cfg

# 30B-A3B by hand (h 2048, 48 layers, 32 query heads and 4 key-value heads of 128, 128 experts
# of 768, top 8, V 151,936): a layer's attention 2 x 2048 x 4096 (wq, wo) + 2 x 2048 x 512 (wk,
# wv) + 2 x 128 (q/k norms) = 18,874,624; norms 4096; router 128 x 2048 = 262,144; experts
# 3 x 128 x 768 x 2048 = 603,979,776 -> 623,120,640 a layer, x 48 = 29,909,790,720; + 2048 +
# 2 x 151,936 x 2048 (622,329,856)                                          = 30,532,122,624;
# activated: less 48 x 120/128 of the experts (566,231,040 each)            =  3,353,032,704
PUBLISHED = {"30b_a3b": (30_532_122_624, 3_353_032_704), "235b_a22b": (235_093_634_560, 22_190_763_520)}


@pytest.mark.parametrize("size", list(PUBLISHED))
def test_parameter_counts_by_hand(size):
    cfg = model_cfg("qwen3_moe", size)
    p = qwen3_moe_spec.parameters(cfg)
    assert (p["total"], p["active"]) == PUBLISHED[size]
    assert qwen3_moe.parameter_count(cfg) == PUBLISHED[size][0]


def test_the_gpu1_size_loads_one_gpu_by_hand():
    # gpu1: the 30B-A3B's widths, 2 layers: 2 x 623,120,640 (a layer, above) = 1,246,241,280;
    # + 2048 + 2 x 151,936 x 2048 (622,329,856)                              = 1,868,573,184;
    # activated: less 2 x 120/128 of the experts (566,231,040 each)            =   736,111,104
    cfg = model_cfg("qwen3_moe", "gpu1")
    p = qwen3_moe_spec.parameters(cfg)
    assert (p["total"], p["active"]) == (1_868_573_184, 736_111_104)
    assert qwen3_moe.parameter_count(cfg) == 1_868_573_184
    # a billion or more; AdamW's fp32 state (16 bytes a parameter, 29.9 GB) under 60% of 80 GB
    assert p["total"] >= 1e9 and 16 * p["total"] < 0.6 * 80e9


def test_flops_by_hand():
    cfg = model_cfg("qwen3_moe", "30b_a3b")
    # scores and values over the causal pairs, (s + 1) / 2 keys a query (contract/flops.py):
    # 3 x 32 x 256 x 4097 x 48 = 4,833,017,856 (NeMo's s / 2: 4,831,838,208); linear 6 x 48 x
    # (2 x 2048 x 4096 + 2 x 2048 x 512 + 3 x 2048 x 768 x 8 = 56,623,104) = 16,307,453,952;
    # output 6 x 151,936 x 2048 = 1,866,989,568
    assert qwen3_moe_spec.flops_per_token(cfg) == 4_833_017_856 + 16_307_453_952 + 1_866_989_568
    assert flops.flops_per_sample(cfg) == 23_007_461_376 * 4096


titan = pytest.importorskip("frameworks.pytorch.titan.session")
titan_moe = pytest.importorskip("frameworks.pytorch.titan.moe_session")
torchtitan = pytest.importorskip("torchtitan.models.qwen3", reason="torchtitan not installed")


@pytest.mark.parametrize("size", ["tiny", "30b_a3b", "235b_a22b"])
def test_cpu_definition_has_torchtitans_parameters_and_flops(size):
    cfg = model_cfg("qwen3_moe", size)
    params, per_token = titan.parameters_and_flops(titan_moe.model_config(cfg, qwen3_moe), cfg["seq_len"])
    p = qwen3_moe_spec.parameters(cfg)
    assert params == qwen3_moe.parameter_count(cfg) == p["total"]
    # torchtitan: 6 x activated less the embedding + 6 l H (2 d) s
    assert per_token == 6 * (p["active"] - p["embedding"]) + \
        6 * cfg["layers"] * cfg["heads"] * 2 * cfg["head_dim"] * cfg["seq_len"]
    if size != "tiny":   # the named sizes are torchtitan's flavours
        flavour = torchtitan.model_registry(qwen3_moe.TITAN_FLAVOURS[size]).model
        assert titan.parameters_and_flops(flavour, cfg["seq_len"]) == (params, per_token)


def test_same_weights_give_torchtitans_logits():
    """torchtitan's forward runs its experts in bf16 (torch._grouped_mm): within 1% of the
    largest logit; a wrong routing, rotation or norm is off by far more."""
    cfg = model_cfg("qwen3_moe", "tiny")
    ours = qwen3_moe.Model(**cfg)
    parallelize.init_parameters(ours, qwen3_moe, 0)
    theirs = titan_moe.model_config(cfg, qwen3_moe).build()
    missing, unexpected = theirs.load_state_dict(
        {titan_moe.torchtitan_name(qwen3_moe, k): v for k, v in ours.state_dict().items()}, strict=False)
    assert missing == [] and set(unexpected) == {f"layers.{i}.moe.tokens_per_expert_E" for i in "01"}
    tokens = qwen3_moe.synthetic_tokens(cfg, 2, 0)[:, :-1]
    positions = torch.arange(tokens.shape[1]).expand(tokens.shape[0], -1)
    with torch.no_grad():
        logits = theirs(tokens, attention_masks=theirs.get_attention_masks(positions))
        assert (ours(tokens) - logits).abs().max() <= 1e-2 * logits.abs().max()
