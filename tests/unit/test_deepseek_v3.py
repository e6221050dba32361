"""DeepSeek-V3: its parameter counts and FLOPs against hand figures (dgxc-benchmarking's published
163.7 TFLOP/s among them), and the CPU definition (frameworks/pytorch/models/deepseek_v3.py,
frameworks/pytorch/models/moe.py) against torchtitan's own model: the same parameters, activated
parameters and FLOPs, the same router, MoE layer and logits from the same weights; the
GPU path's settings (frameworks/pytorch/titan/moe_session.py)."""
import importlib.util

import pytest
import torch

from analysis.figures import flops
from contract.models import deepseek_v3 as deepseek_v3_spec
from frameworks.pytorch.layouts import parallelize
from frameworks.pytorch.models import deepseek_v3, moe
from tests.frameworks_env import model_cfg

# 671B by hand, from the shape (h 7168, 128 heads, q rank 1536, kv rank 512, head dims 128 + 64
# and 128, 61 layers of which 3 dense of 18,432, 256 experts of 2048, 1 shared, top 8, V 129,280):
#   attention: wq_a 11,010,048 + q_norm 1,536 + wq_b 1536 x 24,576 = 37,748,736 + wkv_a 7168 x 576
#              = 4,128,768 + kv_norm 512 + wkv_b 512 x 32,768 = 16,777,216 + wo 16,384 x 7168
#              = 117,440,512 -> 187,107,328; + 2 norms 14,336 = 187,121,664 a layer, x 61
#              = 11,414,421,504
#   dense:     3 x 7168 x 18,432 = 396,361,728, x 3 = 1,189,085,184
#   MoE:       routed 3 x 256 x 2048 x 7168 = 11,274,289,152 + router 256 x 7168 = 1,835,008
#              + shared 3 x 7168 x 2048 = 44,040,192 -> 11,320,164,352, x 58 = 656,569,532,416
#   + final norm 7168 + embedding and output 2 x 129,280 x 7168 = 1,853,358,080
#                                                                          = 671,026,404,352
#   activated: less 58 x (11,274,289,152 - 8/256 of it, 352,321,536)     = 37,552,282,624
# 16B the same way (27 layers, 1 dense of 10,944, 64 experts of 1408, 2 shared, top 6, no q rank,
# h 2048, 16 heads, V 102,400): 15,706,484,224, of which 2,661,150,208 activated.
PUBLISHED = {"16b": (15_706_484_224, 2_661_150_208), "671b": (671_026_404_352, 37_552_282_624)}


@pytest.mark.parametrize("size", list(PUBLISHED))
def test_parameter_counts_by_hand(size):
    cfg = model_cfg("deepseek_v3", size)
    p = deepseek_v3_spec.parameters(cfg)
    assert (p["total"], p["active"]) == PUBLISHED[size]
    assert deepseek_v3.parameter_count(cfg) == PUBLISHED[size][0]        # the model, on meta


def test_the_gpu1_size_loads_one_gpu_by_hand():
    # gpu1: the 16B's widths, 3 layers (1 dense, 2 MoE). A layer's MLA 2048 x 16 x 192 (wq) +
    # 2048 x 576 (wkv_a) + 512 x 16 x 256 (wkv_b) + 16 x 128 x 2048 (wo) = 13,762,560, its norms
    # 2 x 2048 + 512 = 4,608: 13,767,168, x 3 = 41,301,504; the dense SwiGLU 3 x 2048 x 10,944 =
    # 67,239,936; a MoE layer's experts 3 x 64 x 1408 x 2048 = 553,648,128 + router 64 x 2048 =
    # 131,072 + 2 shared 3 x 2048 x 1408 x 2 = 17,301,504: 571,080,704, x 2 = 1,142,161,408; +
    # 2048 + 2 x 102,400 x 2048 (419,430,400)                                 = 1,670,135,296;
    # activated: less 2 x 58/64 of the experts (501,743,616 each)              =   666,648,064
    cfg = model_cfg("deepseek_v3", "gpu1")
    p = deepseek_v3_spec.parameters(cfg)
    assert (p["total"], p["active"]) == (1_670_135_296, 666_648_064)
    assert deepseek_v3.parameter_count(cfg) == 1_670_135_296
    # a billion or more, and AdamW's fp32 state (16 bytes a parameter, 26.7 GB) leaves over half
    # of an 80 GB H100 to the activations
    assert p["total"] >= 1e9 and 16 * p["total"] < 0.6 * 80e9


def test_flops_as_dgxc_benchmarking_counts_them_reproduce_its_163_7():
    cfg = model_cfg("deepseek_v3", "671b")
    # attention 3 x 128 x (128 + 64 + 128) x 4096 x (61 + 1 MTP)             = 31,205,621,760
    # linear 6 x (MLA 187,105,280 x 62 + SwiGLUs 3 x 396,361,728 + 59 x 3 x 7168 x 2048 x (1 + 8))
    #        = 6 x (11,600,527,360 + 24,574,427,136)                         = 217,049,726,976
    # output 6 x 129,280 x 7168 x 2 + 6 x 2 x 7168^2 (MTP's)                 =  11,736,711,168
    per_token = deepseek_v3_spec.nemo_flops_per_token(cfg, mtp_layers=1)   # NeMo's: s / 2 keys a query
    assert per_token == 31_205_621_760 + 217_049_726_976 + 11_736_711_168 == 259_992_059_904
    # dgxc-benchmarking v25.05: 1,024 H100, 644,781.55 tokens/s: 163.7 TFLOP/s per GPU, 16.55% of 989
    assert round(644_781.55 / 1024 * per_token / 1e12, 1) == 163.7
    assert round(644_781.55 / 1024 * per_token / 1e12 / 989 * 100, 2) == 16.55
    assert round(122_755.33 / 128 * per_token / 1e12, 1) == 249.3                 # 128 GB200
    # the suite's convention (contract/flops.py) counts the causal pairs, (s + 1) / 2 keys a
    # query: attention 3 x 128 x 320 x 4097 x 62 = 31,213,240,320, 7,618,560 more: 259,999,678,464
    assert deepseek_v3_spec.flops_per_token(cfg, mtp_layers=1) == 259_992_059_904 + 7_618_560 == 259_999_678_464
    # the suite's model trains without MTP: one layer less of each kind, and its output once:
    # NeMo's 249,811,304,448 a token, ours + 3 x 128 x 320 x 61 (7,495,680) = 249,818,800,128
    assert deepseek_v3_spec.nemo_flops_per_token(cfg) == 249_811_304_448
    assert deepseek_v3_spec.flops_per_token(cfg) == 249_811_304_448 + 7_495_680 == 249_818_800_128
    assert flops.flops_per_sample(cfg) == 249_818_800_128 * 4096
    assert flops.published_flops_per_sample(cfg) == 249_811_304_448 * 4096


titan = pytest.importorskip("frameworks.pytorch.titan.session")
titan_moe = pytest.importorskip("frameworks.pytorch.titan.moe_session")
torchtitan = pytest.importorskip(
    "torchtitan.models.deepseek_v3", reason="torchtitan not installed: `make venv` installs "
    "requirements-torchtitan.txt (pip install --no-deps)")


@pytest.mark.parametrize("size", ["tiny", "16b", "671b"])
def test_cpu_definition_has_torchtitans_parameters_and_activated_flops(size):
    cfg = model_cfg("deepseek_v3", size)
    params, per_token = titan.parameters_and_flops(titan_moe.model_config(cfg, deepseek_v3), cfg["seq_len"])
    p = deepseek_v3_spec.parameters(cfg)
    assert params == deepseek_v3.parameter_count(cfg) == p["total"]
    # torchtitan's count: 6 x activated less the embedding + 6 l H (n + r + v) s, no causal halving
    attention = 6 * cfg["layers"] * cfg["heads"] * (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
                                                    + cfg["v_head_dim"]) * cfg["seq_len"]
    assert per_token == 6 * (p["active"] - p["embedding"]) + attention
    if size == "671b":
        assert per_token == 281_158_232_064


@pytest.mark.parametrize("size", ["16b", "671b"])
def test_named_sizes_are_torchtitans_flavours(size):
    flavour = torchtitan.model_registry(deepseek_v3.TITAN_FLAVOURS[size]).model
    assert titan.parameters_and_flops(flavour, 4096) == titan.parameters_and_flops(
        titan_moe.model_config(model_cfg("deepseek_v3", size), deepseek_v3), 4096)


def test_same_weights_give_torchtitans_moe_layer_and_logits():
    """torchtitan's model (FlexAttention and its grouped GEMM have a CPU forward, no backward),
    loaded with the CPU definition's weights: the same MoE output (torchtitan runs its experts
    in bf16: within 1% of the layer's largest value) and logits."""
    cfg = model_cfg("deepseek_v3", "tiny")
    ours = deepseek_v3.Model(**cfg)
    parallelize.init_parameters(ours, deepseek_v3, 0)
    theirs = titan_moe.model_config(cfg, deepseek_v3).build()
    missing, unexpected = theirs.load_state_dict(
        {titan_moe.torchtitan_name(deepseek_v3, k): v for k, v in ours.state_dict().items()}, strict=False)
    assert missing == [] and unexpected == ["layers.1.moe.tokens_per_expert_E"]   # not persistent there
    x = torch.randn(2, 64, cfg["hidden"], generator=torch.Generator().manual_seed(1))
    tokens = deepseek_v3.synthetic_tokens(cfg, 2, 0)[:, :-1]
    positions = torch.arange(tokens.shape[1]).expand(tokens.shape[0], -1)
    with torch.no_grad():
        mine, theirs_moe = ours.layers["1"].moe(x), theirs.layers["1"].moe(x)
        assert (mine - theirs_moe).abs().max() <= 1e-2 * mine.abs().max()
        logits = theirs(tokens, attention_masks=theirs.get_attention_masks(positions))
        assert torch.allclose(ours(tokens), logits, atol=1e-4, rtol=0)


def test_router_is_torchtitans_with_node_limited_groups():
    """671B's routing (sigmoid, 4 of 8 groups, renormalised, x 2.5) at a small size: the same
    experts and scores as torchtitan's TokenChoiceTopKRouter, with an expert bias."""
    from torchtitan.models.common.config_utils import make_router_config
    from torchtitan.models.common.param_init import skip_param_init
    settings = dict(top_k=4, score_func="sigmoid", num_expert_groups=8, num_limited_groups=4,
                    route_scale=2.5, route_norm=True)
    theirs = make_router_config(dim=32, num_experts=32, gate_param_init={"weight": skip_param_init},
                                **settings).build()
    ours = moe.Router(32, 32, 4, "sigmoid", 8, 4, 2.5, True)
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        ours.gate.weight.copy_(torch.randn(32, 32, generator=gen))
        theirs.gate.weight.copy_(ours.gate.weight)
        x, bias = torch.randn(3, 5, 32, generator=gen), 0.1 * torch.randn(32, generator=gen)
        scores, experts = ours(x, bias)
        want_scores, want_experts, _ = theirs(x, bias)
    order, want_order = experts.argsort(-1), want_experts.reshape(-1, 4).argsort(-1)
    assert torch.equal(experts.gather(-1, order), want_experts.reshape(-1, 4).gather(-1, want_order))
    assert torch.allclose(scores.gather(-1, order), want_scores.reshape(-1, 4).gather(-1, want_order))
    # node-limited: a token's experts come from at most 4 groups of 4
    assert max(len(set((experts[t] // 4).tolist())) for t in range(15)) <= 4


def test_received_rows_reordered_expert_by_expert():
    # from rank 0: 2 rows of local expert 0, 1 of expert 1; from rank 1: 0 and 3
    got = torch.tensor([[2, 1], [0, 3]])          # rows: 0 1 | 2 | (none) | 3 4 5
    assert moe.expert_major(got).tolist() == [0, 1, 2, 3, 4, 5]
    got = torch.tensor([[1, 2], [3, 0]])          # rows: 0 | 1 2 | 3 4 5 | (none)
    assert moe.expert_major(got).tolist() == [0, 3, 4, 5, 1, 2]


def test_load_balancing_moves_the_bias_against_the_load():
    layer = moe.MoE(8, 4, 4, 0, 1, "softmax", None, load_balance_coeff=1e-3)
    layer.tokens_per_expert.copy_(torch.tensor([5.0, 1.0, 1.0, 1.0]))   # mean 2
    counts = moe.balance([layer], None)
    # sign(mean - load) = -1, 1, 1, 1; x 1e-3, centred (mean 0.5e-3): -1.5e-3, 0.5e-3 x 3
    assert layer.expert_bias.tolist() == pytest.approx([-1.5e-3, 0.5e-3, 0.5e-3, 0.5e-3])
    assert counts.tolist() == [[5.0, 1.0, 1.0, 1.0]] and layer.tokens_per_expert.sum() == 0


def _spec(parallel_settings, devices, **over):
    from contract import parallel
    from tests.runspecs import run_spec
    lay, bad = parallel.resolve(parallel_settings, devices, 1, None, None)
    assert bad == []
    spec = {"model": dict(model_cfg("deepseek_v3", "tiny"), **over.pop("model", {})), "precision": "amp",
            "amp_dtype": "bf16", "compile": False, "seed": 0, "parallel": lay.as_dict(), **over}
    return run_spec(spec), lay


def test_the_gpu_paths_expert_settings_and_gaps():
    spec, lay = _spec({"ep": 4, "fsdp": True}, 8)
    p = titan.configs(spec, lay)["parallelism"]
    assert (p.expert_parallel_degree, p.data_parallel_shard_degree, p.data_parallel_replicate_degree) == (4, 8, 1)
    assert titan_moe.gap(spec, lay) is None
    assert titan_moe.tokens_per_rank(spec.model, lay) == 64
    spec, lay = _spec({"ep": 2}, 2)     # dp is torchtitan's dp_replicate: ep has no rank to borrow
    assert titan_moe.gap(spec, lay) == (
        "torchtitan's experts borrow FSDP's ranks (dp_shard x cp x tp = efsdp x ep): without "
        "parallel.fsdp dp_shard is 1, and ep = 2 does not divide cp x tp = 1; set parallel.fsdp=true")
    spec, lay = _spec({"ep": 2, "tp": 2}, 4)   # ep inside tp: no FSDP needed
    assert titan_moe.gap(spec, lay) is None and titan_moe.tokens_per_rank(spec.model, lay) == 32
    spec, lay = _spec({"ep": 2, "fsdp": True}, 2, model={"dispatch": "deepep"})
    if importlib.util.find_spec("deep_ep") is None:
        assert titan_moe.gap(spec, lay) == ("model.dispatch=deepep needs DeepEP (the deep_ep package), "
                                            "which is not installed in this environment")
    assert titan_moe.gap(spec.replace(model=spec.model.replace(dispatch="nccl")), lay) == \
        "model.dispatch must be one of standard, deepep, hybridep, got 'nccl'"


@pytest.mark.parametrize("dispatch", ["deepep", "hybridep"])
def test_deepeps_dispatchers_have_their_buffer_sizes_and_need_expert_parallelism(dispatch):
    """DeepEP's and HybridEP's dispatchers size their buffers by the model's width (hidden_dim,
    which torchtitan's make_routed_experts_config fills from `dim`) and a rank's tokens of
    one micro-batch, and dispatch to experts on other ranks: ep = 1 is refused before anything
    is built, as torchtitan's update_ep_token_dispatcher_config refuses it."""
    spec, lay = _spec({"ep": 2, "fsdp": True}, 2, model={"dispatch": dispatch})
    config = titan_moe.model_config(spec.model, deepseek_v3, max_tokens=titan_moe.tokens_per_rank(spec.model, lay))
    dispatchers = [layer.moe.routed_experts.token_dispatcher for layer in config.layers if layer.moe is not None]
    assert dispatchers and all((d.hidden_dim, d.num_max_tokens_per_rank) == (64, 64) for d in dispatchers)
    spec, lay = _spec({"fsdp": True}, 2, model={"dispatch": dispatch})
    assert titan_moe.gap(spec, lay) == (f"model.dispatch={dispatch} (DeepEP's kernels) dispatches to experts "
                                        "on other ranks: it needs expert parallelism, parallel.ep > 1")



def test_the_step_sync_probes_steps_are_not_the_experts_timed_ones(monkeypatch):
    """On a GPU the harness asks after warm-up whether a step waits on the device, by two
    extra steps (frameworks/pytorch/sync_probe.py): the experts' per-step figures leave them
    out, or the record's timed steps would count two too many. (A stand-in probe here: the
    CPU has no device to sleep.)"""
    from contract import parallel
    from frameworks.common.distenv import DistEnv
    from frameworks.pytorch import session as torch_session
    from frameworks.pytorch import worker
    from tests.runspecs import run_spec

    def probe(self):
        self.step(), self.step()
        return {"syncs": False}
    monkeypatch.setattr(torch_session.TorchSession, "step_syncs", probe)
    layout, bad = parallel.resolve({}, 1, 2)
    spec = run_spec(model=model_cfg("deepseek_v3", "tiny"), precision="fp32", amp_dtype=None,
                    compile=False, batch_size=2, seed=0, device="cpu", rendezvous_timeout_s=30,
                    parallel=layout.as_dict(), warmup_steps=1)
    session = worker.model_session(spec, DistEnv(0, 1, 0, 1, "127.0.0.1", 1))
    session.step()                                    # the warm-up
    assert session.step_syncs() == {"syncs": False}
    assert len(session.balancer.steps) == 1 and session.balancer.tokens is None
    session.step()                                    # the first timed step counts
    assert len(session.balancer.steps) == 2 and session.balancer.tokens is not None
