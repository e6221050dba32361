"""The report's Llama 3 section (analysis/sections/llama.py): tokens/s, TFLOP/s per device and MFU
of a point, against figures worked by hand, and dgxc-benchmarking's figure beside a record that
names an H100 and has a published configuration."""
import json
import os

import analysis
from analysis import tables
from analysis.figures import metrics
from analysis.sections import llama, special
from tests.frameworks_env import model_cfg
from tests.sweepfiles import write_point, write_repeat

H100 = "NVIDIA H100 80GB HBM3"


def _point(sweep, name, *, cp=2, device=H100, gpus_per_node=8):
    """dgxc-benchmarking's Llama 3.1 8B BF16 case on 8 H100s: tp 1, pp 1, cp 2 (dp 4), micro 1,
    accumulation 32, global 128, seq 8192; each rank's record counts 16 samples a step so that
    the 8 ranks count the global batch's 128."""
    shape = {k: v for k, v in model_cfg("llama3", "8b").items() if k not in ("name", "size")}
    dp = gpus_per_node // cp
    pt = write_point(sweep, name, model="llama3", size="8b", precision="amp", amp_dtype="bf16",
                     batch_size=128 // gpus_per_node, gpus_per_node=gpus_per_node, settings=shape,
                     repeats=1)
    pt["parallel"] = {"dp": dp, "tp": 1, "pp": 1, "cp": cp, "fsdp": False, "schedule": "1f1b",
                      "virtual_stages": 1, "sequence_parallel": False, "micro_batch_size": 1,
                      "accumulation": 128 // dp, "global_batch_size": 128}
    with open(os.path.join(pt["dir"], "point.json"), "w") as f:
        json.dump(pt, f)
    # 10 iterations of the global batch in 127.8 s on every rank: 12.78 s an iteration, dgxc's
    write_repeat(pt, 0, [127.8] * gpus_per_node, steps=10, device=device)
    return pt


def test_tokens_mfu_and_the_published_figure_beside_them(tmp_path):
    sweep = str(tmp_path)
    _point(sweep, "000-llama3-h100")
    _point(sweep, "001-llama3-h100-cp1", cp=1)          # a layout dgxc did not publish
    results = analysis.load(sweep)
    m = metrics.metrics(results).set_index("point")
    mine = m.loc["000-llama3-h100"]
    samples_per_s = 1280 / 127.8                          # 10 x 128 sequences in 127.8 s
    assert abs(mine.tokens_per_s - samples_per_s * 8192) < 1e-6          # 82,048 tokens/s
    per_sequence = 51_472_785_408 * 8192                  # tests/unit/test_llama3.py's hand figures:
    theirs = 57_914_449_920 * 8192                        # ours (the causal pairs) and theirs (s x s)
    tflops = samples_per_s * per_sequence / 8 / 1e12      # 527.91 TFLOP/s per H100
    assert abs(mine.tflops_per_device - tflops) < 1e-6
    assert abs(mine.mfu - tflops / 989.0) < 1e-9          # 53.38% of the dense BF16 peak
    # in their count (dgxc-benchmarking's, torchtitan's): 593.97 TFLOP/s, 60.06%, beside its 59.99%
    assert abs(mine.published_mfu - samples_per_s * theirs / 8 / 1e12 / 989.0) < 1e-9

    text = llama.section(m.reset_index()[m.reset_index().model == "llama3"], results)
    ours = next(line for line in text.splitlines() if line.startswith("| 000-llama3-h100 "))
    cells = [c.strip() for c in ours.strip("|").split("|")]
    assert cells[2:5] == ["dp4 x cp2", "1x8", "1 / 32 / 128"]
    assert cells[6] == "12,780.0" and cells[8:] == ["82,048", "10,256", "527.9", "53.4%", "60.1%"]
    # beside it, dgxc-benchmarking's own row of that layout: 82,028 / 8 GPUs, its MFU, its step
    beside = [line for line in text.splitlines() if "llama3.1-8b" in line]
    assert len(beside) == 1 and beside[0].startswith("| 000-llama3-h100 ")
    row = [c.strip() for c in beside[0].strip("|").split("|")]
    assert row[1:3] == ["dgxc_llama3.1_h100", "llama3.1-8b-bf16-8gpu"]
    assert row[8:12] == ["12,780", "-", "10,254*", "59.99%"]
    assert "001-llama3-h100-cp1" not in "\n".join(beside)  # cp 1: no published row


def test_no_published_row_for_another_device(tmp_path):
    sweep = str(tmp_path)
    _point(sweep, "000-llama3-a100", device="NVIDIA A100-SXM4-80GB")
    results = analysis.load(sweep)
    text = special.render_special(results)
    assert "## llama3: tokens/s" in text and "llama3.1-8b" not in text
    assert "No published Llama 3 figure has this layout on this device" in text


def test_point_layout_for_the_published_match():
    manifest = {"nodes": 2, "gpus_per_node": 8, "precision": "amp", "amp_dtype": "bf16",
                "compile": True, "model": {"hidden": 4096, "heads": 32, "layers": 32, "seq_len": 8192,
                                           "recompute": True},
                "parallel": {"dp": 8, "tp": 2, "pp": 1, "cp": 1, "fsdp": True, "micro_batch_size": 2,
                             "global_batch_size": 16, "schedule": "1f1b", "virtual_stages": 1}}
    assert llama.point_layout(manifest, H100) == {
        "nodes": 2, "gpus_per_node": 8, "precision": "amp", "amp_dtype": "bf16", "dp": 8, "tp": 2,
        "pp": 1, "micro_batch_size": 2, "global_batch_size": 16, "fsdp": True, "cp": 1, "ep": 1,
        "hidden": 4096, "heads": 32, "layers": 32, "seq_len": 8192, "recompute": "full",
        "compile": True, "device": H100}
    assert tables.layout_label(manifest["parallel"]) == "dp8 x tp2, fsdp"
