"""Llama 3: its parameter counts against the published sizes, its FLOPs against hand figures,
and the CPU definition (frameworks/pytorch/models/llama3.py) against torchtitan's own model: the same
parameters, the same FLOPs, the same logits from the same weights."""
import re

import pytest
import torch

from analysis.figures import flops
from contract.models import llama3 as llama3_spec
from frameworks.pytorch.layouts import parallelize
from frameworks.pytorch.models import llama3
from tests.frameworks_env import model_cfg
from tests.runspecs import run_spec

# Published sizes (Meta's model cards: "8B", "70B", "405B", Llama 3.2 "1B"), exactly, from the
# config, by hand: per layer 2h^2 (wq, wo) + 2h x 1024 (wk, wv: 8 key-value heads of 128, 64 at
# 1B) + 3hf (SwiGLU) + 2h (RMSNorms); then a final RMSNorm h, the embedding and the output V h.
#   8B:   2x4096^2 + 2x4096x1024 + 3x4096x14336 + 8192 = 218,112,000; x 32 = 6,979,584,000;
#         + 4096 + 2 x 128256 x 4096 (1,050,673,152)                           = 8,030,261,248
#   70B:  134,217,728 + 16,777,216 + 704,643,072 + 16,384 = 855,654,400; x 80 = 68,452,352,000;
#         + 8192 + 2 x 128256 x 8192 (2,101,346,304)                           = 70,553,706,496
#   405B: 536,870,912 + 33,554,432 + 2,617,245,696 + 32,768 = 3,187,703,808; x 126
#         = 401,650,679,808; + 16384 + 2 x 128256 x 16384 (4,202,692,608)      = 405,853,388,800
#   1B:   8,388,608 + 2,097,152 + 50,331,648 + 4096 = 60,821,504; x 16 = 973,144,064;
#         + 2048 + 128256 x 2048 once (tied: 262,668,288)                      = 1,235,814,400
PUBLISHED = {"1b": 1_235_814_400, "8b": 8_030_261_248, "70b": 70_553_706_496, "405b": 405_853_388_800}


@pytest.mark.parametrize("size", list(PUBLISHED))
def test_parameter_count_matches_the_published_size(size):
    cfg = model_cfg("llama3", size)
    assert llama3_spec.parameters(**cfg)["total"] == PUBLISHED[size]
    assert llama3.parameter_count(cfg) == PUBLISHED[size]      # the model itself, on meta


def test_flops_of_8b_at_8192_by_hand():
    cfg = model_cfg("llama3", "8b")
    assert cfg["seq_len"] == 8192
    # non-embedding: 8,030,261,248 - 128256 x 4096 (525,336,576) = 7,504,924,672
    assert llama3_spec.parameters(**cfg)["non_embedding"] == 7_504_924_672
    # the suite's count (contract/flops.py), a sequence: 6 N s = 45,029,548,032 x 8192 =
    # 368,882,057,478,144; the causal pairs' scores and values 12 l h s (s + 1) / 2 = 12 x 32 x
    # 4096 x 8192 x 8193 / 2 = 52,783,000,584,192 (6,443,237,376 a token)
    per_sequence = flops.flops_per_sample(cfg)
    assert per_sequence == 368_882_057_478_144 + 52_783_000_584_192 == 421_665_058_062_336
    assert per_sequence // 8192 == 45_029_548_032 + 6_443_237_376 == 51_472_785_408
    # PaLM's, torchtitan's and dgxc-benchmarking's (the full s x s): 6 N + 12 l h s = 45,029,548,032
    # + 12 x 32 x 4096 x 8192 (12,884,901,888) = 57,914,449,920 a token, x 8192 =
    # 474,435,173,744,640 a sequence: dgxc-benchmarking's "4.74E+14" per 8B sequence, 12.5% more
    published = llama3_spec.palm_flops_per_sample(cfg)
    assert published == flops.published_flops_per_sample(cfg) == 57_914_449_920 * 8192 == 474_435_173_744_640
    assert f"{published:.2E}" == "4.74E+14" and published / per_sequence == pytest.approx(1.1251, abs=1e-4)
    # no recompute term: MFU counts the model's FLOPs
    assert flops.flops_per_sample(dict(cfg, recompute=True)) == per_sequence


def test_a_tied_output_layer_counts_once_and_is_a_matmul():
    cfg = model_cfg("llama3", "1b")   # tied: nothing is left out as "embedding"
    p = llama3_spec.parameters(**cfg)
    assert p["embedding"] == 0 and p["non_embedding"] == 1_235_814_400
    assert llama3_spec.palm_flops_per_sample(cfg) == (6 * 1_235_814_400 + 12 * 16 * 2048 * 8192) * 8192
    assert llama3_spec.flops_per_sample(cfg) == 6 * 1_235_814_400 * 8192 + 6 * 16 * 2048 * 8192 * 8193


titan = pytest.importorskip("frameworks.pytorch.titan.session")
torchtitan = pytest.importorskip(
    "torchtitan.models.llama3", reason="torchtitan not installed: `make venv` installs "
    "requirements-torchtitan.txt (pip install --no-deps)")


@pytest.mark.parametrize("size", ["tiny", "8b"])
def test_cpu_definition_has_torchtitans_parameters_and_flops(size):
    cfg = model_cfg("llama3", size)
    params, per_token = titan.parameters_and_flops(titan.model_config(cfg), cfg["seq_len"])
    assert params == llama3.parameter_count(cfg)
    assert per_token * cfg["seq_len"] == llama3_spec.palm_flops_per_sample(cfg)   # torchtitan's: the full s x s


@pytest.mark.parametrize("size", ["1b", "8b", "70b"])
def test_named_sizes_are_torchtitans_flavours(size):
    cfg = model_cfg("llama3", size)
    flavour = torchtitan.model_registry(titan.FLAVOURS[size]).model
    assert titan.parameters_and_flops(flavour, 8192) == titan.parameters_and_flops(
        titan.model_config(cfg), 8192) == (PUBLISHED[size], llama3_spec.palm_flops_per_sample(cfg) // 8192)


def _torchtitan_name(ours: str) -> str:
    name = ours.replace("embed.weight", "tok_embeddings.weight").replace("head.norm", "norm")
    name = name.replace("head.output", "lm_head")
    return re.sub(r"attention\.(w[qkv])\.", r"attention.qkv_linear.\1.", name)


def test_same_weights_give_torchtitans_logits():
    """torchtitan's own model (its FlexAttention forward runs on the CPU; its backward does
    not) loaded with the CPU definition's weights computes the same logits."""
    cfg = model_cfg("llama3", "tiny")
    ours = llama3.Model(**cfg)
    parallelize.init_parameters(ours, llama3, 0)
    theirs = titan.model_config(cfg).build()
    theirs.load_state_dict({_torchtitan_name(k): v for k, v in ours.state_dict().items()}, strict=True)
    tokens = llama3.synthetic_tokens(cfg, 2, 0)[:, :-1]
    positions = torch.arange(tokens.shape[1]).expand(tokens.shape[0], -1)
    with torch.no_grad():
        expected = theirs(tokens, attention_masks=theirs.get_attention_masks(positions))
        assert torch.allclose(ours(tokens), expected, atol=1e-5, rtol=0)


# ---- the GPU path's settings (torchtitan runs on GPUs; its configs and checks run here) ------
def _spec(parallel_settings, devices, micro, glob, **over):
    from contract import parallel
    lay, bad = parallel.resolve(parallel_settings, devices, micro, None, glob)
    assert bad == []
    spec = {"model": dict(model_cfg("llama3", "tiny"), **over.pop("model", {})), "precision": "amp",
            "amp_dtype": "bf16", "compile": False, "seed": 0, "parallel": lay.as_dict(), **over}
    return run_spec(spec), lay


@pytest.mark.parametrize("settings,devices,micro,glob,degrees,batch", [
    # (replicate, shard, tp, pp, cp), (local, global): torchtitan's own validation accepts each
    ({"fsdp": True}, 8, 2, 16, (1, 8, 1, 1, 1), (2, 16)),
    ({}, 4, 1, 8, (4, 1, 1, 1, 1), (1, 8)),                      # accumulation 2: torchtitan's too
    ({"tp": 2, "cp": 2, "fsdp": True}, 8, 1, 2, (1, 2, 2, 1, 2), (1, 2)),
    ({"pp": 2, "schedule": "interleaved_1f1b"}, 4, 1, 8, (2, 1, 1, 2, 1), (4, 8)),  # 4 micro-batches
])
def test_layout_maps_onto_torchtitans_parallelism(settings, devices, micro, glob, degrees, batch):
    from torchtitan.distributed import ParallelDims
    spec, lay = _spec(settings, devices, micro, glob)
    c = titan.configs(spec, lay)
    p, t = c["parallelism"], c["training"]
    assert (p.data_parallel_replicate_degree, p.data_parallel_shard_degree, p.tensor_parallel_degree,
            p.pipeline_parallel_degree, p.context_parallel_degree) == degrees
    assert (t.local_batch_size, t.global_batch_size, t.seq_len) == (*batch, 64)
    if lay.pp > 1:
        assert p.pipeline_parallel_schedule == "Interleaved1F1B"
        assert t.local_batch_size // p.pipeline_parallel_microbatch_size == lay.accumulation
    dims = ParallelDims.from_config(p, devices)          # torchtitan checks the sizes' product
    assert (dims.dp_replicate, dims.dp_shard, dims.tp, dims.pp, dims.cp) == degrees
    # accumulation as torchtitan's trainer derives it: global / (local x batch degree)
    assert t.global_batch_size // (t.local_batch_size * dims.dp_replicate * dims.dp_shard) == \
        (1 if lay.pp > 1 else lay.accumulation)
    assert t.mixed_precision_param == "bfloat16" and c["ac_config"] is None


def test_recompute_compile_and_the_gaps():
    from torchtitan.distributed.activation_checkpoint import FullAC
    spec, lay = _spec({}, 1, 1, 1, compile=True, model={"recompute": True})
    c = titan.configs(spec, lay)
    assert isinstance(c["ac_config"], FullAC.Config) and c["compile_config"].enable
    assert titan.gap(spec, lay) is None
    spec16, _ = _spec({}, 1, 1, 1, amp_dtype="fp16")
    assert "bf16" in titan.gap(spec16, lay)
    tied, lay2 = _spec({"pp": 2}, 2, 1, 2, model={"tie_embeddings": True})
    assert titan.gap(tied, lay2) == "torchtitan does not pipeline a model whose output is tied to its embedding (1B)"
    # FlexAttention's context parallelism splits by its 128-token blocks (seen on the CPU)
    cp, lay3 = _spec({"cp": 2}, 2, 1, 1)
    assert titan.gap(cp, lay3) == ("torchtitan's context parallelism (FlexAttention) needs the sequence "
                                   "a multiple of cp x 128: 64 % (2 x 128) = 64")
    assert titan.gap(cp.replace(model=cp.model.replace(seq_len=8192)), lay3) is None


def test_the_path_of_a_point_is_chosen_and_said():
    """torchtitan where the ranks have GPUs and it loads (torch 2.13 here, torchtitan 0.3.0),
    the suite's own definition otherwise, with the reason (torch 2.11, where torchtitan 0.3.0
    does not load: tests/integration/test_torch_2_11.py)."""
    import types

    import torch
    from frameworks.pytorch.models import llama3
    spec, _ = _spec({}, 1, 1, 1)
    assert titan.choose(spec.replace(device="cpu"), llama3) == \
        (False, "a CPU rank: torchtitan's path is the GPU's (its FlexAttention has no CPU backward)")
    assert titan.choose(spec.replace(device="cuda"), llama3) == \
        (True, f"torchtitan 0.3.0 loads with torch {torch.__version__}")
    family = types.ModuleType("frameworks.pytorch.models.no_such_family")   # a family torchtitan lacks
    family.TITAN_PARALLELIZE, family.TITAN_SHARDING = "torchtitan.no_such_module:f", "torchtitan.no_such_module:g"
    assert titan.unavailable(family) == (
        f"torchtitan 0.3.0 with torch {torch.__version__} does not load "
        "(ModuleNotFoundError: No module named 'torchtitan.no_such_module')")


def test_a_torch_older_than_torchtitans_path_needs_takes_the_suites_own(monkeypatch):
    """The adapter's releases `when=TORCHTITAN` decide before torchtitan is imported: a torch
    older than 2.13 on a GPU point takes the suite's own definition and says which release."""
    from contract import versions
    from frameworks.pytorch.models import llama3
    found = versions.found
    monkeypatch.setattr(versions, "found", lambda rs: {**found(rs), "torch": "2.11.0+cu128"})
    spec, _ = _spec({}, 1, 1, 1)
    use, why = titan.choose(spec.replace(device="cuda"), llama3)
    assert use is False
    assert why.startswith("torch 2.11.0+cu128 is older than 2.13.0, the oldest this worker supports on "
                          "torchtitan's path"), why
    assert why.endswith("the suite's own definition on the GPU, with torch's FSDP2, TP, PP, CP and EP")
