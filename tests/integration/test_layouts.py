"""The GPT at every layout, through `python -m launch` on this machine's CPU (gloo): one sweep
of the tiny cases (conf/gpt_case_tiny/: DLPerf's groups at 1 to 4 ranks, one model, one
global batch of 8 sequences, dropout off), then, case by case, the table below.

- Every step's loss equals the single-device case's to a relative 1e-5 in fp32 (what
  differs is only the order of floating-point sums: all-reduce, reduce-scatter, split
  matmuls; at most 2.1e-7 here).
- Each rank's record gives its place in the (dp, pp, tp) grid, and the ranks' owned
  parameter counts add up to the model's count; a split layout holds less per rank.
- Throughput counts the global batch: a repeat's samples are 8 x its timed steps.
"""
import glob
import json

import pytest

from contract import parallel
from tests.launching import launch

pytestmark = pytest.mark.e2e
STEPS = {"warmup_steps": 2, "measure_steps": 3}
REL = 1e-5
BASELINE = "DP_1x1x1_8_64x4"
# case -> what it adds: (dp, tp, pp), FSDP, and the schedule where there is a pipeline
TABLE = {
    "DP_2x1x1_8_64x4": ((2, 1, 1), False),
    "MP_1x2x1_8_64x4": ((1, 2, 1), False),
    "PP_1x1x2_8_64x4": ((1, 1, 2), False),        # 1F1B, 2 micro-batches of 4
    "2D_2x2x1_8_64x4": ((2, 2, 1), False),
    "2D_PP_1x2x2_8_64x4": ((1, 2, 2), False),
    "FSDP_2x1x1_8_64x4": ((2, 1, 1), True),
    "FSDP_MP_2x2x1_8_64x4": ((2, 2, 1), True),    # FSDP2 over dp of tensor-parallel shards
}


def _ranks(sweep, key=lambda rec: rec["spec"]["config"]["case"]):
    """key (by default the case) -> the rank records of repeat 0 (sorted by rank)."""
    out = {}
    for path in sorted(glob.glob(f"{sweep}/points/*/repeat-00/rank-*.json")):
        rec = json.load(open(path))
        out.setdefault(key(rec), []).append(rec)
    return out


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    cases = ",".join([BASELINE, *TABLE])
    res = launch("-m", f"gpt_case_tiny={cases}", "repeats=1", *(f"{k}={v}" for k, v in STEPS.items()),
                 "launcher=local", "timeout_s=300", "rendezvous_timeout_s=60",
                 f"hydra.sweep.dir={root}", timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    return _ranks(root)


def _losses(rec):
    return [s["loss"] for s in rec["steps"]]


def test_the_single_device_case_trains(sweep):
    [rec] = sweep[BASELINE]
    assert rec["status"] == "ok" and len(rec["steps"]) == sum(STEPS.values())
    first, last = _losses(rec)[0], _losses(rec)[-1]
    assert last < first  # it learns


@pytest.mark.parametrize("case", TABLE)
def test_every_layout_trains_the_same_model(sweep, case):
    (dp, tp, pp), fsdp = TABLE[case]
    ranks = sweep[case]
    assert len(ranks) == dp * tp * pp
    assert all(r["status"] == "ok" for r in ranks), [r.get("error") for r in ranks]
    expected = _losses(sweep[BASELINE][0])
    for rec in ranks:
        assert _losses(rec) == pytest.approx(expected, rel=REL), f"rank {rec['rank']}"
    lay = parallel.Layout.of(ranks[0]["parallel"]["layout"])
    assert (lay.dp, lay.tp, lay.pp, lay.fsdp, lay.global_batch_size) == (dp, tp, pp, fsdp, 8)


@pytest.mark.parametrize("case", TABLE)
def test_grid_places_and_parameter_counts(sweep, case):
    ranks = sweep[case]
    lay = parallel.Layout.of(ranks[0]["parallel"]["layout"])
    model = ranks[0]["parallel"]["parameters"]["model"]
    assert model == sweep[BASELINE][0]["parallel"]["parameters"]["model"]
    places = [r["parallel"]["coords"] for r in ranks]
    assert places == [parallel.coords(r["rank"], lay) for r in ranks]
    assert sorted((c["dp"], c["pp"], c["tp"]) for c in places) == \
        sorted((d, p, t) for d in range(lay.dp) for p in range(lay.pp) for t in range(lay.tp))
    owned = sum(r["parallel"]["parameters"]["owned"] for r in ranks)
    assert owned == pytest.approx(model, abs=0.5)
    split = lay.tp > 1 or lay.pp > 1 or lay.fsdp
    held = [r["parallel"]["parameters"]["held"] for r in ranks]
    assert all(h < model for h in held) if split else all(h == model for h in held)


@pytest.mark.parametrize("case", [BASELINE, *TABLE])
def test_throughput_counts_the_global_batch(sweep, case):
    ranks = sweep[case]
    timed = sum(s["samples"] for r in ranks for s in r["steps"] if s["phase"] == "measure")
    assert timed == 8 * STEPS["measure_steps"]


def test_a_pipeline_records_its_bubble(sweep):
    for rec in sweep["PP_1x1x2_8_64x4"]:
        pipe = rec["pipeline"]
        assert (pipe["schedule"], pipe["stages"], pipe["microbatches"]) == ("1f1b", 2, 2)
        assert pipe["ideal_bubble"] == pytest.approx(1 / 3)          # (2 - 1) / (2 + 2 - 1)
        assert 0 <= pipe["measured_bubble"] < 1 and pipe["busy_s"] > 0
    assert "pipeline" not in sweep["DP_2x1x1_8_64x4"][0]


# GPipe and interleaved 1F1B on PP_1x1x2 (interleaved: 4 stages on 2 ranks, micro-batches of 2),
# sequence parallelism on MP_1x2x1 (1F1B, the default, where there is no pipeline): one sweep,
# its other combinations excluded
VARIANTS = ("gpt_case_tiny=PP_1x1x2_8_64x4,MP_1x2x1_8_64x4", "parallel.schedule=1f1b,gpipe,interleaved_1f1b",
            "parallel.sequence_parallel=false,true", "batch_size=4,2",
            'exclude=[{where:"parallel.sequence_parallel != (case == \'MP_1x2x1_8_64x4\')"},'
            '{where:"(parallel.schedule == \'1f1b\') != (case == \'MP_1x2x1_8_64x4\')"},'
            '{where:"(batch_size == 2) != (parallel.schedule == \'interleaved_1f1b\')"}]')


def _variant(rec) -> tuple:
    cfg = rec["spec"]["config"]
    return (cfg["case"], cfg["parallel"]["schedule"], cfg["parallel"]["sequence_parallel"], cfg["batch_size"])


def test_schedules_and_sequence_parallel_agree(sweep, tmp_path):
    """The variants, each another point of the same model, beside the sweep's single-device
    case (the same settings)."""
    root = tmp_path / "variants"
    res = launch("-m", *VARIANTS, "repeats=1", *(f"{k}={v}" for k, v in STEPS.items()), "launcher=local",
                 "timeout_s=300", "rendezvous_timeout_s=60", f"hydra.sweep.dir={root}", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    variants = _ranks(root, key=_variant)
    assert sorted(variants) == [("MP_1x2x1_8_64x4", "1f1b", True, 4), ("PP_1x1x2_8_64x4", "gpipe", False, 4),
                                ("PP_1x1x2_8_64x4", "interleaved_1f1b", False, 2)]
    expected = _losses(sweep[BASELINE][0])
    for name, ranks in variants.items():
        assert all(r["status"] == "ok" for r in ranks), [r.get("error") for r in ranks]
        for rec in ranks:
            assert _losses(rec) == pytest.approx(expected, rel=REL), f"{name} rank {rec['rank']}"
    inter = variants["PP_1x1x2_8_64x4", "interleaved_1f1b", False, 2]
    assert inter[0]["pipeline"]["stages"] == 4 and inter[0]["pipeline"]["microbatches"] == 4
    assert inter[0]["parallel"]["stages"] == [0, 2]   # rank 0 holds stages 0 and 2
