"""Published figures of parallel layouts (analysis/published/layouts.py): DLPerf's GPT table,
dgxc-benchmarking's and torchtitan's Llama 3.1, checked against their own arithmetic and found
by a point's layout; bad files are refused in one line."""
import collections

import pytest
import yaml

from analysis.published import sources as published
from analysis.published import layouts
from analysis.published.sources import PublishedError

H100 = "NVIDIA H100 80GB HBM3"


def of(file, **want):
    return [r for r in layouts.rows() if r["file"] == file
            and all(r.get(k) == v for k, v in want.items())]


def test_dlperf_gpt_has_its_18_cases_in_four_groups_by_two_implementations():
    rows = of("dlperf_gpt_v100")
    cases = {r["case"]: r["group"] for r in rows}
    assert len(cases) == 18 and len(rows) == 36
    assert collections.Counter(cases.values()) == {"DP": 4, "MP": 4, "2D": 6, "PP": 4}
    assert collections.Counter(r["impl"] for r in rows) == {"oneflow": 18, "megatron_lm": 18}
    for r in rows:
        assert (r["device"], r["precision"], r["amp_dtype"], r["recompute"], r["seq_len"]) == \
            ("Tesla V100-SXM2-16GB", "amp", "fp16", True, 2048)
        assert r["date"] == "2021-05" and r["url"].startswith("https://github.com/Oneflow-Inc/DLPerf/")
        # OneFlow published its memory, Megatron-LM's column has none
        assert ("memory_mib" in r) == (r["impl"] == "oneflow")
    pp = of("dlperf_gpt_v100", case="2D_PP_2x4x4_512_2304x24", impl="oneflow")[0]
    assert (pp["nodes"], pp["gpus_per_node"], pp["dp"], pp["tp"], pp["pp"], pp["micro_batch_size"],
            pp["accumulation"], pp["global_batch_size"], pp["hidden"], pp["heads"], pp["layers"]) == \
        (4, 8, 2, 4, 4, 8, 32, 512, 2304, 24, 24)
    assert (pp["latency_ms"], pp["memory_mib"], pp["samples_per_s"], pp["tflops_per_gpu"],
            pp["peak_percent"], pp["pflops"]) == (13117.18, 11958, 39.03, 36.85, 29, 1.18)
    megatron = of("dlperf_gpt_v100", case="2D_PP_2x4x4_512_2304x24", impl="megatron_lm")[0]
    assert (megatron["latency_ms"], megatron["samples_per_s"], megatron["tflops_per_gpu"]) == \
        (15331.23, 33.40, 31.53)


def test_dlperf_gpt_figures_agree_with_their_own_arithmetic():
    # samples/s = global batch / latency; aggregate PFLOP/s = TFLOP/s per GPU x GPUs / 1000,
    # published to two decimals. A typo in the transcription breaks one of them.
    for r in of("dlperf_gpt_v100"):
        assert r["samples_per_s"] == pytest.approx(r["global_batch_size"] / (r["latency_ms"] / 1000),
                                                   rel=0.01), r["case"]
        assert abs(r["pflops"] - r["tflops_per_gpu"] * r["devices"] / 1000) <= 0.0051, r["case"]


@pytest.mark.parametrize("tp,padded", [(1, 50304), (4, 50688), (8, 51200), (16, 51200), (32, 53248)])
def test_the_vocabulary_is_padded_to_a_multiple_of_128_tp(tp, padded):
    # tp 4: OneFlow's own log, "padded vocab (size: 50257) with 431 dummy tokens (new size: 50688)"
    assert {r["padded_vocab_size"] for r in of("dlperf_gpt_v100", tp=tp)} == {padded}


def test_dgxc_llama_figures_as_published_and_derived():
    rows = of("dgxc_llama3.1_h100")
    assert len(rows) == 22   # 8B at 8..128 GPUs, 70B at 64..2048, each in BF16 and FP8
    assert {(r["size"], r["precision"]) for r in rows} == {
        ("8b", "amp"), ("8b", "fp8"), ("70b", "amp"), ("70b", "fp8")}
    r = of("dgxc_llama3.1_h100", case="llama3.1-8b-bf16-8gpu")[0]
    assert (r["tp"], r["pp"], r["cp"], r["micro_batch_size"], r["accumulation"],
            r["global_batch_size"], r["dp"]) == (1, 1, 2, 1, 32, 128, 4)
    assert (r["step_time_s"], r["tokens_per_s_total"], r["mfu_percent"]) == (12.78, 82028, 59.99)
    # derived and said so: dp = 8 / (1 x 1 x 2); tokens/s per GPU = 82028 / 8
    assert r["tokens_per_s_per_gpu"] == 10253.5 and {"dp", "tokens_per_s_per_gpu"} <= set(r["derived"])
    # MFU by the README's own formula: 128 x 4.74E+14 / 12.78 s / 8 / 989E12 = 60.0%
    assert 128 * 4.74e14 / 12.78 / 8 / 989e12 * 100 == pytest.approx(r["mfu_percent"], abs=0.05)
    seventy = of("dgxc_llama3.1_h100", case="llama3.1-70b-fp8-2048gpu")[0]
    assert (seventy["tp"], seventy["pp"], seventy["cp"], seventy["vp"], seventy["dp"],
            seventy["tokens_per_s_total"], seventy["mfu_percent"]) == (4, 4, 2, 5, 64, 3053178, 36.23)
    for r in rows:   # tokens/s = sequence x global batch / step time, the README's formula
        assert r["tokens_per_s_total"] == pytest.approx(
            r["seq_len"] * r["global_batch_size"] / r["step_time_s"], rel=0.005), r["case"]


def test_torchtitan_rows_name_their_report_device_and_versions():
    rows = of("torchtitan_llama3")
    assert len(rows) == 32
    assert {r["date"] for r in rows} == {"2024-12", "2025-06"}
    h200 = of("torchtitan_llama3", case="trainy-h200-8-nodes")[0]
    assert (h200["device"], h200["dp"], h200["tokens_per_s_per_gpu"], h200["memory_gib"]) == \
        ("NVIDIA H200", 64, 10753, 46.97)
    assert "llama3-8b_h200_202506_trainy-whitefiber.md" in h200["url"]
    t5 = of("torchtitan_llama3", case="T5-interleaved-1f1b")[0]
    assert (t5["dp"], t5["tp"], t5["pp"], t5["layers"], t5["tokens_per_s_per_gpu"]) == (8, 8, 8, 126, 128)
    assert all(r["software"] and r["url"].startswith("https://github.com/pytorch/torchtitan/")
               for r in rows)


GPT_2D_PP = {"nodes": 4, "gpus_per_node": 8, "dp": 2, "tp": 4, "pp": 4, "micro_batch_size": 8,
             "global_batch_size": 512, "hidden": 2304, "heads": 24, "layers": 24, "seq_len": 2048,
             "precision": "amp"}


def test_a_gpt_layout_finds_dlperfs_rows():
    found = layouts.find(GPT_2D_PP)
    assert [(r["case"], r["impl"], r["samples_per_s"]) for r in found] == [
        ("2D_PP_2x4x4_512_2304x24", "oneflow", 39.03), ("2D_PP_2x4x4_512_2304x24", "megatron_lm", 33.40)]
    assert layouts.find(dict(GPT_2D_PP, amp_dtype="fp16", device="Tesla V100-SXM2-16GB")) == found
    assert layouts.find(dict(GPT_2D_PP, tp=2, dp=4)) == []                 # another layout
    assert layouts.find(dict(GPT_2D_PP, cp=2)) == []                       # DLPerf had no CP
    assert layouts.find(dict(GPT_2D_PP, device=H100)) == []                # another device
    assert layouts.find(dict(GPT_2D_PP, amp_dtype="bf16")) == []
    assert layouts.find(dict(GPT_2D_PP, fsdp=True)) == []                 # DLPerf's DP is plain
    point = dict(GPT_2D_PP)
    del point["seq_len"]                        # a point that does not say: no match
    assert layouts.find(point) == []
    # a layout measured twice (DP_8x1x1 and 2D_8x1x1): both cases, both implementations
    dp8 = dict(GPT_2D_PP, nodes=1, dp=8, tp=1, pp=1, micro_batch_size=2, global_batch_size=16,
               hidden=1536, heads=16, layers=16)
    assert sorted((r["case"], r["impl"]) for r in layouts.find(dp8)) == [
        ("2D_8x1x1_16_1536x16", "megatron_lm"), ("2D_8x1x1_16_1536x16", "oneflow"),
        ("DP_8x1x1_16_1536x16", "megatron_lm"), ("DP_8x1x1_16_1536x16", "oneflow")]


LLAMA_8B = {"nodes": 1, "gpus_per_node": 8, "dp": 4, "tp": 1, "pp": 1, "cp": 2, "micro_batch_size": 1,
            "global_batch_size": 128, "hidden": 4096, "heads": 32, "layers": 32, "seq_len": 8192,
            "precision": "amp", "amp_dtype": "bf16", "device": H100}


def test_a_llama_layout_on_h100_finds_dgxcs_row():
    found = layouts.find(LLAMA_8B)
    assert [(r["file"], r["tokens_per_s_total"], r["mfu_percent"]) for r in found] == [
        ("dgxc_llama3.1_h100", 82028, 59.99)]
    assert [r["mfu_percent"] for r in layouts.find(dict(LLAMA_8B, precision="fp8", amp_dtype=None))] == [40.59]
    assert layouts.find(dict(LLAMA_8B, cp=1, dp=8)) == []
    seventy = dict(LLAMA_8B, nodes=8, dp=2, tp=4, pp=4, global_batch_size=128, hidden=8192,
                   heads=64, layers=80, schedule="interleaved_1f1b")
    assert [r["tokens_per_s_total"] for r in layouts.find(dict(seventy, virtual_stages=5))] == [71756]
    assert layouts.find(dict(seventy, virtual_stages=2)) == []      # Layout's name for vp


def test_a_torchtitan_layout_finds_its_row_but_not_on_another_h100():
    point = {"nodes": 1, "gpus_per_node": 8, "dp": 8, "tp": 1, "pp": 1, "global_batch_size": 16,
             "hidden": 4096, "heads": 32, "layers": 32, "seq_len": 8192, "precision": "amp",
             "amp_dtype": "bf16", "fsdp": True, "compile": False}
    assert [(r["case"], r["tokens_per_s_per_gpu"]) for r in layouts.find(point)] == [("T1-fsdp", 5762)]
    assert [r["case"] for r in layouts.find(dict(point, compile=True))] == ["T1-fsdp-compile"]
    # Meta's H100s are 96 GB HBM2e parts at 500 W: not an 80 GB SXM5 H100
    assert layouts.find(dict(point, device=H100)) == []


def test_layout_files_are_not_read_as_throughputs():
    assert not set(published.names()) & set(published.names(figure=layouts.FIGURE))
    assert set(published.names(figure=layouts.FIGURE)) == {
        "dlperf_gpt_v100", "dgxc_llama3.1_h100", "torchtitan_llama3", "dgxc_deepseek_v3"}


GOOD = {"figure": "layouts", "source": "s", "url": "https://example.org", "date": "2021-05",
        "device": "Tesla V100-SXM2-16GB", "seq_len": 2048, "precision": "amp",
        "implementations": {"of": {"software": "x"}},
        "cases": [{"case": "DP_2x1x1_4_64x2", "nodes": 1, "gpus_per_node": 2, "dp": 2, "tp": 1,
                   "pp": 1, "micro_batch_size": 2, "accumulation": 1, "global_batch_size": 4,
                   "hidden": 64, "heads": 4, "layers": 2, "of": {"samples_per_s": 1.5}}]}


def with_case(**changes):
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    for k, v in changes.items():
        if v is None:
            del data["cases"][0][k]
        else:
            data["cases"][0][k] = v
    return data


@pytest.mark.parametrize("data,says", [
    (dict(GOOD, figure="throughput"), "not a `figure: layouts` file"),
    (dict(GOOD, cases=[]), "no list of cases"),
    (dict(GOOD, implementations={}), "no mapping of implementations"),
    (with_case(of=None), "no figures of any implementation"),
    # the layout's own relations (contract/parallel.py), as every point of the suite is checked
    (with_case(tp=2), "dp x tp x pp = nodes x gpus_per_node: 2 x 2 x 1 = 4, not the 2 devices"),
    (with_case(global_batch_size=8), "micro x dp x accumulation = global: 2 x 2 x 1 = 4, not 8"),
    (with_case(heads=3), "hidden % heads = 0: 64 % 3 = 1"),
    (with_case(local_batch_size=3), "per replica x dp = global: 3 x 2 = 6, not 4"),
    (with_case(ep=3), "ep = 3 does not divide dp x cp x tp = 2 x 1 x 1 = 2"),
    (with_case(tp=2, dp=1, heads=1, global_batch_size=2), "heads % tp = 0: 1 % 2 = 1"),
    (with_case(layers="two"), "layers 'two' (a positive integer)"),
    (with_case(hidden=None), "no hidden"),
    (with_case(flops=3), "unknown keys flops"),
    (with_case(of={"samples_per_s": -1}), "samples_per_s is not a positive number"),
    (with_case(of={"mfu_percent": 140}), "is not a positive number (at most 100"),
    (with_case(of={"speed": 1}), "figures must be a mapping of"),
])
def test_a_bad_file_is_refused_in_one_line(tmp_path, data, says):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(PublishedError) as err:
        layouts.read_layouts(tmp_path / "bad.yaml")
    assert says in str(err.value) and "\n" not in str(err.value)
    assert "bad.yaml" in str(err.value)


def test_a_good_file_reads_and_a_folder_with_a_bad_one_says_which(tmp_path):
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(GOOD))
    [row] = layouts.rows(str(tmp_path))
    assert (row["case"], row["impl"], row["cp"], row["derived"], row["devices"]) == \
        ("DP_2x1x1_4_64x2", "of", 1, ["cp", "ep"], 2)
    (tmp_path / "zbad.yaml").write_text(yaml.safe_dump(with_case(tp=2)))
    with pytest.raises(PublishedError, match="zbad.yaml: case DP_2x1x1_4_64x2"):
        layouts.rows(str(tmp_path))


# ---- one rule: a published row is checked by contract/parallel.py, as a point is -----------------
def test_every_rows_grid_and_batches_are_the_layouts_own():
    """The suite's resolve gives every row's dp and accumulation from its sizes and batches,
    with none of the layout's relations broken (the schedules' too: 1F1B's accumulation >= pp)."""
    from contract import parallel
    for r in layouts.rows():
        if not (r.get("micro_batch_size") and r.get("global_batch_size")):
            continue
        lay, bad = parallel.resolve({k: r[k] for k in ("tp", "pp", "cp", "ep")}, r["devices"],
                                    r["micro_batch_size"], None, r["global_batch_size"])
        assert (lay.dp, lay.accumulation) == (r["dp"], r["accumulation"]), r["case"]
        assert bad == [], (r["case"], bad)


def test_a_broken_row_is_refused_by_the_layouts_own_lines(tmp_path):
    from contract import parallel
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(with_case(dp=3, heads=5)))
    with pytest.raises(PublishedError) as err:
        layouts.read_layouts(tmp_path / "bad.yaml")
    grid = parallel.data_parallel(2, 1, 1, 1, 3)[1]
    batches = parallel.accumulation_of(2, 3, 4, 1)[1]
    shape = parallel.shape_violations({"hidden": 64, "heads": 5}, 1)
    assert len(grid + batches + shape) == 3
    assert str(err.value).endswith("case DP_2x1x1_4_64x2: " + "; ".join(grid + batches + shape))


def _dlperf_point(case):
    from launchers.plan import points
    from tests.unit.test_points import cfg_of
    return points.make_point(cfg_of(f"gpt_case={case}", "launcher=local"), "/tmp/dlbench-test-sweep", 0,
                             commit=None)


@pytest.mark.parametrize("case", sorted({r["case"] for r in of("dlperf_gpt_v100")}))
def test_a_dlperf_case_and_the_suites_point_for_it_agree(case):
    """conf/gpt_case/<case>.yaml makes the point of DLPerf's case: its layout, its shape and the
    vocabulary it holds are the published row's (one padding rule, contract/parallel.py's), so
    the row is found beside the point and the point's FLOPs in the row's count (Megatron's, with
    recompute: the spec's published count; docs/flops.md) are the row's."""
    from analysis.figures import flops
    from contract.models import gpt
    point, rows = _dlperf_point(case), of("dlperf_gpt_v100", case=case)
    assert len(rows) == 2
    lay, model = point.parallel, point.model
    for r in rows:
        assert (point.nodes, point.gpus_per_node, lay.dp, lay.tp, lay.pp, lay.micro_batch_size,
                lay.accumulation, lay.global_batch_size) == \
            (r["nodes"], r["gpus_per_node"], r["dp"], r["tp"], r["pp"], r["micro_batch_size"],
             r["accumulation"], r["global_batch_size"])
        assert (model.hidden, model.heads, model.layers, model.seq_len, model.recompute) == \
            (r["hidden"], r["heads"], r["layers"], r["seq_len"], r["recompute"])
        assert (model.get("data_vocab_size", model.vocab_size), model.vocab_size) == \
            (r["vocab_size"], r["padded_vocab_size"])
        assert flops.published_flops_per_sample(dict(model)) == gpt.flops_per_iteration(
            1, r["seq_len"], r["layers"], r["hidden"], r["padded_vocab_size"], recompute=True)
    keys = {"nodes": point.nodes, "gpus_per_node": point.gpus_per_node, **lay.as_dict(),
            **{k: model[k] for k in ("hidden", "heads", "layers", "seq_len", "recompute")},
            "precision": point.precision, "model": model.name}
    assert layouts.find(keys, rows) == rows
