"""Context parallelism in the layout (contract/parallel.py): where cp sits in the grid,
its relation sequence % (2 x cp) = 0 and the grouped-query relation kv_heads % tp = 0, against
figures worked by hand, each broken relation one line naming its values."""
import pytest

from contract import parallel


def test_context_parallel_sits_between_data_and_tensor_parallel():
    # 16 devices, tp 2 x cp 2 x pp 2: dp = 16 / 8 = 2; rank = ((pp * dp + dp_i) * cp + cp_i) * tp + tp_i
    lay, bad = parallel.resolve({"tp": 2, "pp": 2, "cp": 2}, 16, 1, None, 4)
    assert bad == [] and (lay.dp, lay.cp, lay.world, lay.accumulation) == (2, 2, 16, 2)
    assert [parallel.coords(r, lay) for r in (0, 1, 2, 3, 4, 7, 8, 15)] == [
        {"dp": 0, "pp": 0, "cp": 0, "tp": 0}, {"dp": 0, "pp": 0, "cp": 0, "tp": 1},
        {"dp": 0, "pp": 0, "cp": 1, "tp": 0}, {"dp": 0, "pp": 0, "cp": 1, "tp": 1},
        {"dp": 1, "pp": 0, "cp": 0, "tp": 0}, {"dp": 1, "pp": 0, "cp": 1, "tp": 1},
        {"dp": 0, "pp": 1, "cp": 0, "tp": 0}, {"dp": 1, "pp": 1, "cp": 1, "tp": 1}]
    assert lay.name() == "tp2-pp2-cp2-m2" and lay.key() == "tp2-pp2-cp2-m2"
    assert not lay.is_data_parallel()
    # 4 chunks of a sequence over cp 2: rank 0 the first and last, rank 1 the middle two
    assert [parallel.cp_chunks(lay, i) for i in (0, 1)] == [(0, 3), (1, 2)]


@pytest.mark.parametrize("settings,devices,line", [
    ({"cp": 3}, 4, "dp x tp x pp x cp = nodes x gpus_per_node: tp x pp x cp = 1 x 1 x 3 = 3 does not divide the 4 devices"),
    ({"cp": 2, "tp": 2, "dp": 2}, 4, "dp x tp x pp x cp = nodes x gpus_per_node: 2 x 2 x 1 x 2 = 8, not the 4 devices"),
])
def test_context_parallel_counts_in_the_grid(settings, devices, line):
    _, bad = parallel.resolve(settings, devices, 1)
    assert bad == [line]


def test_sequence_splits_into_two_chunks_per_context_parallel_rank():
    llama = {"name": "llama3", "hidden": 64, "heads": 4, "kv_heads": 2, "layers": 2}
    lay, _ = parallel.resolve({"cp": 4}, 4, 1)
    assert parallel.model_violations(dict(llama, seq_len=64), lay) == []          # 64 % 8 = 0
    assert parallel.model_violations(dict(llama, seq_len=36), lay) == ["sequence % (2 x cp) = 0: 36 % (2 x 4) = 4"]
    assert parallel.model_violations({"name": "gpt", "seq_len": 64}, lay) == [
        "context parallelism (cp = 4) is built for model=deepseek_v3, llama3, qwen3_moe only, not model=gpt"]
    with pytest.raises(parallel.LayoutError, match="parallel.cp must be an integer >= 1, got 0"):
        parallel.resolve({"cp": 0}, 1, 1)


def test_grouped_query_attention_heads_split_over_tp():
    lay, _ = parallel.resolve({"tp": 4}, 4, 1)
    assert parallel.model_violations({"name": "llama3", "hidden": 64, "heads": 8, "kv_heads": 2, "layers": 2}, lay) == [
        "kv_heads % tp = 0: 2 % 4 = 2"]
    assert parallel.model_violations({"name": "llama3", "hidden": 64, "heads": 8, "kv_heads": 3, "layers": 2},
                                     parallel.resolve({}, 1, 1)[0]) == ["heads % kv_heads = 0: 8 % 3 = 2"]


def test_a_point_from_before_context_parallelism_reads_as_cp_1():
    lay, _ = parallel.resolve({"tp": 2}, 2, 1)
    old = {k: v for k, v in lay.as_dict().items() if k != "cp"}
    assert parallel.Layout.of(old) == lay and lay.cp == 1
