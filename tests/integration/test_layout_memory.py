"""Memory per rank as the layouts promise it, in the records and the report, through
`python -m launch` and `python -m analysis report` on this machine's CPU.

The model is GPT-2 small (12 layers, 768 hidden, 12 heads, vocabulary 50,304, sequence 128;
global batch 2, micro-batch 1: benchmarks/layout_memory.md) with its hidden size, vocabulary
and sequence each divided by 8: every term of a rank's tensor memory scales the same way (the
blocks' parameters as hidden^2, the tied embedding as vocabulary x hidden, the activations and
logits as sequence x hidden and sequence x vocabulary: 1/64 each), so the ratio of one
layout's peak to one rank's is the method's, not the size's. Measured (the figure a CPU rank
records: its live tensors' peak): fsdp=2 0.638 of one rank's, tp=2 0.565, at this size and
at full size alike; with glibc's defaults the peak RSS of the same runs reads 1.04 at fsdp=2
(the allocator keeps FSDP's freed blocks), which is why the report shows tensors.
"""
import glob
import json

import pytest

from tests.launching import analysis, launch

pytestmark = pytest.mark.e2e
SHAPE = {"layers": 12, "hidden": 96, "heads": 12, "vocab_size": 50304 // 8, "seq_len": 128 // 8}
LAYOUTS = {"1 rank": ["gpus_per_node=1"], "tp=2": ["gpus_per_node=2", "parallel.tp=2"],
           "fsdp=2": ["gpus_per_node=2", "parallel.fsdp=true"]}
STATE_BYTES = 16   # a parameter's fp32 value and gradient and AdamW's two moments


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    root = tmp_path_factory.mktemp("layout-memory")
    common = ["model=gpt", "model.size=full", "model.dropout=0.0", "global_batch_size=2",
              "micro_batch_size=1", "warmup_steps=1", "measure_steps=2", "repeats=1",
              "launcher=local", "device=cpu", "timeout_s=300", "rendezvous_timeout_s=60",
              *(f"model.{k}={v}" for k, v in SHAPE.items())]
    out = {}
    for name, extra in LAYOUTS.items():
        sweep = root / name.replace("=", "").replace(" ", "")
        res = launch(*common, *extra, f"hydra.run.dir={sweep}", timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        out[name] = sweep
    return out


def _records(sweep) -> list:
    recs = [json.load(open(p)) for p in sorted(glob.glob(f"{sweep}/points/*/repeat-00/rank-*.json"))]
    assert recs and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    return recs


def test_a_split_layout_holds_at_most_070_of_one_ranks_tensors(sweeps):
    peak = {name: max(r["memory"]["peak_tensor_bytes"] for r in _records(s)) for name, s in sweeps.items()}
    model = _records(sweeps["1 rank"])[0]["parallel"]["parameters"]["model"]
    assert peak["1 rank"] >= STATE_BYTES * model                   # the whole model state, at least
    assert peak["fsdp=2"] >= STATE_BYTES * model / 2               # half of it, at least
    assert peak["fsdp=2"] <= 0.70 * peak["1 rank"], peak
    assert peak["tp=2"] <= 0.70 * peak["1 rank"], peak
    for recs in map(_records, sweeps.values()):                    # the RSS is still recorded
        assert all(r["memory"]["peak_host_bytes"] > 0 and r["memory"]["peak_device_bytes"] is None
                   for r in recs)


def test_the_report_shows_the_tensors_and_says_so(sweeps, tmp_path):
    res = analysis("report", str(sweeps["fsdp=2"]), "--no-plot", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "memory: the largest rank's peak of live tensors (a CPU rank's" in res.stdout
    [rec] = [r for r in _records(sweeps["fsdp=2"]) if r["rank"] == 0]
    gib = max(r["memory"]["peak_tensor_bytes"] for r in _records(sweeps["fsdp=2"])) / 2**30
    row = next(line for line in res.stdout.splitlines() if "| 2x1x1 (fsdp)" in line)
    assert f"| {gib:.2f} " in row, row
    assert rec["memory"]["peak_tensor_bytes"] > 0
