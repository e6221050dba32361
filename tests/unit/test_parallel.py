"""The layout relations (contract/parallel.py) against figures worked by hand, and
a point refused in one line that names each relation it breaks (launchers/plan/points.py)."""
import pytest

from contract import parallel
from launchers.driver import run_spec
from launchers.plan import points
from tests.unit.test_points import cfg_of


def test_dp_and_accumulation_are_derived():
    # 8 devices, tp 2 x pp 2: dp = 8 / 4 = 2; micro 2 x dp 2 = 4 a round; global 16: 4 rounds
    lay, bad = parallel.resolve({"tp": 2, "pp": 2}, 8, 2, None, 16)
    assert bad == []
    assert (lay.dp, lay.accumulation, lay.per_replica, lay.world) == (2, 4, 8, 8)
    # defaults: micro = batch_size, global = micro x dp, so no accumulation
    lay, bad = parallel.resolve({}, 4, 8)
    assert (lay.dp, lay.micro_batch_size, lay.global_batch_size, lay.accumulation) == (4, 8, 32, 1)
    assert lay.is_data_parallel() and lay.name() == "" and lay.key() == "tp1-pp1"


@pytest.mark.parametrize("settings,devices,micro,glob,line", [
    ({"tp": 3}, 4, 2, None, "dp x tp x pp = nodes x gpus_per_node: tp x pp = 3 x 1 = 3 does not divide the 4 devices"),
    ({"tp": 2, "dp": 4}, 4, 2, None, "dp x tp x pp = nodes x gpus_per_node: 4 x 2 x 1 = 8, not the 4 devices"),
    ({}, 2, 2, 6, "micro x dp x accumulation = global: 2 x 2 x accumulation = 6 has no whole accumulation"),
    ({"pp": 4}, 4, 2, 6, "schedule 1f1b needs accumulation >= pp (a micro-batch per stage): accumulation = 3, pp = 4"),
    ({"pp": 2, "schedule": "interleaved_1f1b"}, 2, 1, 5,
     "schedule interleaved_1f1b needs accumulation a multiple of max(1, accumulation // pp) = 2: accumulation = 5"),
])
def test_each_relation_names_its_values(settings, devices, micro, glob, line):
    _, bad = parallel.resolve(settings, devices, micro, None, glob)
    assert len(bad) == 1 and bad[0].startswith(line)


@pytest.mark.parametrize("model,settings,line", [
    ({"name": "gpt", "hidden": 100, "heads": 16, "layers": 4}, {}, "hidden % heads = 0: 100 % 16 = 4"),
    ({"name": "gpt", "hidden": 1536, "heads": 16, "layers": 16}, {"tp": 3}, "heads % tp = 0: 16 % 3 = 1"),
    ({"name": "gpt", "hidden": 64, "heads": 2, "layers": 3}, {"pp": 2}, "layers % pp = 0: 3 % 2 = 1"),
    ({"name": "gpt", "hidden": 64, "heads": 2, "layers": 6},
     {"pp": 2, "schedule": "interleaved_1f1b", "virtual_stages": 2},
     "layers % (pp x virtual_stages) = 0: 6 % (2 x 2) = 2"),
])
def test_model_relations(model, settings, line):
    lay, _ = parallel.resolve(settings, 6, 1, None, 12)
    assert parallel.model_violations(model, lay) == [line]


def test_vocabulary_padded_as_megatron_pads_it():
    assert parallel.padded_vocab(51200, 8) == 51200          # tp divides it: as given
    assert parallel.padded_vocab(50257, 4) == 50688          # DLPerf's log: 50257 -> 50688 (512 x 99)
    assert parallel.padded_vocab(50257, 8) == 51200          # 1024 x 50
    assert parallel.padded_vocab(1001, 2) == 1024


def test_grid_coordinates_tensor_innermost_pipeline_outermost():
    lay, _ = parallel.resolve({"tp": 2, "pp": 3}, 12, 1, None, 6)   # dp = 2
    # rank = (pp * dp + dp_i) * tp + tp_i
    assert [parallel.coords(r, lay) for r in (0, 1, 2, 5, 11)] == [
        {"dp": 0, "pp": 0, "cp": 0, "tp": 0}, {"dp": 0, "pp": 0, "cp": 0, "tp": 1},
        {"dp": 1, "pp": 0, "cp": 0, "tp": 0}, {"dp": 0, "pp": 1, "cp": 0, "tp": 1},
        {"dp": 1, "pp": 2, "cp": 0, "tp": 1}]
    # 3 nodes x 2: each tensor-parallel pair is one node's two ranks
    lay, _ = parallel.resolve({"tp": 2, "pp": 3}, 6, 1, None, 3)
    assert [parallel.coords(r, lay)["pp"] for r in range(6)] == [0, 0, 1, 1, 2, 2]


def test_ideal_bubble_by_hand():
    one, _ = parallel.resolve({"pp": 4}, 4, 1, None, 32)       # (4 - 1) / (32 + 3) = 3/35
    assert parallel.ideal_bubble(one) == pytest.approx(3 / 35)
    inter, _ = parallel.resolve({"pp": 2, "schedule": "interleaved_1f1b", "virtual_stages": 2}, 2, 1, None, 4)
    assert parallel.ideal_bubble(inter) == pytest.approx(1 / 9)   # (2 - 1) / (2 x 4 + 1)
    flat, _ = parallel.resolve({}, 2, 1)
    assert parallel.ideal_bubble(flat) == 0


def test_names_and_keys():
    lay, _ = parallel.resolve({"tp": 2, "pp": 2, "fsdp": True, "schedule": "gpipe"}, 8, 1, None, 8)
    assert lay.name() == "tp2-pp2-gpipe-fsdp-m4" and lay.key() == "tp2-pp2-gpipe-fsdp-m4"
    lay, _ = parallel.resolve({"fsdp": True}, 4, 2)
    assert lay.name() == "fsdp" and lay.key() == "tp1-pp1-fsdp"
    assert parallel.Layout.of(lay.as_dict()) == lay
    assert lay.with_micro(8).global_batch_size == 32


@pytest.mark.parametrize("settings,line", [
    ({"tp": 0}, "parallel.tp must be an integer >= 1, got 0"),
    ({"schedule": "zb"}, "parallel.schedule must be one of gpipe, 1f1b, interleaved_1f1b, got 'zb'"),
    ({"fsdp": "yes"}, "parallel.fsdp must be true or false, got 'yes'"),
    ({"etp": 2}, "unknown parallel key(s) etp"),
    ({"ep": 0}, "parallel.ep must be an integer >= 1, got 0"),
])
def test_not_a_layout(settings, line):
    with pytest.raises(parallel.LayoutError, match="^" + line.replace("(", r"\(").replace(")", r"\)")):
        parallel.resolve(settings, 2, 1)


def _refusal(*overrides):
    with pytest.raises(points.ConfigError) as exc:
        points.make_point(cfg_of(*overrides), "/tmp/dlbench-test-sweep", 0, commit=None)
    return str(exc.value)


def test_a_point_is_refused_in_one_line_naming_every_broken_relation():
    line = _refusal("model=gpt", "model.size=tiny", "gpus_per_node=4", "parallel.tp=4", "model.layers=3",
                    "parallel.pp=1")
    assert line == "heads % tp = 0: 2 % 4 = 2"
    line = _refusal("model=gpt", "model.size=tiny", "gpus_per_node=2", "parallel.pp=2", "model.layers=3")
    assert line == ("schedule 1f1b needs accumulation >= pp (a micro-batch per stage): accumulation = 1, "
                    "pp = 2; layers % pp = 0: 3 % 2 = 1")
    assert "\n" not in line


def test_layouts_are_for_the_models_built_on_them():
    assert _refusal("model=resnet50", "gpus_per_node=2", "parallel.tp=2") == (
        "parallel layouts (tp2) are built for model=deepseek_v3, gpt, gpt_oss, llama3, qwen3_moe only, "
        "not model=resnet50")
    # the model's spec says which frameworks implement it: refused before any layout is asked
    assert _refusal("model=gpt", "framework=jax", "gpus_per_node=2", "parallel.tp=2") == \
        "model=gpt is built for framework=pytorch only, not jax"


def test_a_layout_point_names_its_layout_and_pads_its_vocabulary():
    p = points.make_point(cfg_of("model=gpt", "model.size=tiny", "gpus_per_node=4", "parallel.tp=2",
                                 "parallel.pp=2", "global_batch_size=16", "batch_size=2",
                                 "model.vocab_size=1001"), "/tmp/dlbench-test-sweep", 3, commit=None)
    assert p.name == "003-pytorch-gpt-fp32-1x4-bs2-tp2-pp2-m8"
    assert p.parallel.accumulation == 8 and p.parallel.global_batch_size == 16
    assert (p.model.vocab_size, p.model.data_vocab_size) == (1024, 1001)
    assert p.notes == ("vocabulary 1001 padded to 1024 (a multiple of 128 x tp = 256), as Megatron-LM pads it",)
    spec = run_spec.of(p, 0)
    assert spec.parallel == p.parallel
    plain = points.make_point(cfg_of("model=resnet50", "gpus_per_node=2"), "/tmp/dlbench-test-sweep", 0, commit=None)
    assert plain.name == "000-pytorch-resnet50-fp32-1x2-bs8" and plain.parallel.global_batch_size == 16


def test_a_batch_size_search_moves_the_layouts_micro_batch():
    from launchers.driver import search
    base = points.make_point(cfg_of("model=gpt", "model.size=tiny", "gpus_per_node=2", "batch_size=max",
                                    "global_batch_size=32"), "/tmp/dlbench-test-sweep", 0, commit=None)
    assert base.parallel.accumulation == 2          # micro 8 (the search's start) x dp 2 x 2
    tried = search.try_point(base, dict(base.search) | {"key": "batch_size"}, 16)
    assert tried.batch_size == 16 and tried.parallel.micro_batch_size == 16
    assert tried.parallel.accumulation == 2 and tried.parallel.global_batch_size == 64


# ---- expert parallelism (a mixture of experts, model=deepseek_v3) ------------------------------
MOE = {"name": "deepseek_v3", "hidden": 64, "heads": 4, "layers": 2, "experts": 8, "seq_len": 64}


def test_expert_parallelism_borrows_the_ranks_of_a_stage():
    # 8 devices, tp 2 x pp 2: dp 2; a stage's 4 ranks as (edp 2, ep 2), ep innermost
    lay, bad = parallel.resolve({"tp": 2, "pp": 2, "ep": 2}, 8, 1, None, 4)
    assert bad == [] and (lay.dp, lay.ep, lay.edp, lay.world) == (2, 2, 2, 8)
    assert [parallel.expert_coords(r, lay) for r in range(8)] == \
        [{"edp": f // 2, "ep": f % 2} for f in (0, 1, 2, 3, 0, 1, 2, 3)]
    assert lay.name() == "tp2-pp2-ep2-m2" and not lay.is_data_parallel()
    # ep over the whole stage: dp 4 on 4 ranks, ep 4, each expert on one rank
    lay, _ = parallel.resolve({"ep": 4}, 4, 1)
    assert (lay.dp, lay.edp, lay.name()) == (4, 1, "ep4")
    assert parallel.model_violations(MOE, lay) == []


@pytest.mark.parametrize("settings,devices,model,line", [
    ({"ep": 3}, 4, {}, "dp x cp x tp = edp x ep (torchtitan's dp_shard x cp x tp = efsdp x ep): "
                       "ep = 3 does not divide dp x cp x tp = 4 x 1 x 1 = 4"),
    ({"ep": 3}, 6, {}, "experts % ep = 0: 8 % 3 = 2"),
    ({"ep": 2, "tp": 2}, 4, {"seq_len": 63}, "sequence % (cp x tp) = 0 (with ep, each tp rank routes "
                                             "its part of the sequence): 63 % (1 x 2) = 1"),
    ({"ep": 2}, 2, {"name": "gpt"}, "expert parallelism (ep = 2) is built for model=deepseek_v3, gpt_oss, "
                                    "qwen3_moe only, not model=gpt"),
    ({"tp": 2, "sequence_parallel": True}, 2, {}, "sequence parallelism is built for model=gpt, llama3 only, "
                                                  "not model=deepseek_v3"),
])
def test_each_expert_relation_names_its_values(settings, devices, model, line):
    lay, bad = parallel.resolve(settings, devices, 1, None, None)
    assert line in bad + parallel.model_violations(dict(MOE, **model), lay)


def test_an_expert_layout_is_refused_in_one_line_before_anything_runs():
    line = _refusal("model=deepseek_v3", "model.size=tiny", "gpus_per_node=2", "parallel.ep=2",
                    "model.experts=3")
    assert line == "experts % ep = 0: 3 % 2 = 1"
    line = _refusal("model=deepseek_v3", "model.size=tiny", "gpus_per_node=4", "parallel.ep=3")
    assert line == ("dp x cp x tp = edp x ep (torchtitan's dp_shard x cp x tp = efsdp x ep): ep = 3 does not "
                    "divide dp x cp x tp = 4 x 1 x 1 = 4; experts % ep = 0: 8 % 3 = 2")
    p = points.make_point(cfg_of("model=deepseek_v3", "model.size=tiny", "gpus_per_node=4", "parallel.ep=2",
                                 "parallel.tp=2", "batch_size=1", "global_batch_size=4"),
                          "/tmp/dlbench-test-sweep", 1, commit=None)
    assert p.name == "001-pytorch-deepseek_v3-fp32-1x4-bs1-tp2-ep2-m2" and p.parallel.ep == 2
