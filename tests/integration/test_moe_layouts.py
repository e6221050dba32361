"""Tiny mixtures of experts (DeepSeek-V3; GPT-OSS with its sliding window, sinks and biased
experts) at expert-parallel layouts on this machine's CPU (gloo), through `python -m launch`:
ep = 2 on 2 ranks, ep = 2 with FSDP, ep = 2 x tp = 2 on 4, one sweep per model whose impossible
combinations exclusion rules skip (experts % ep among them). Every step's loss equals the
single-device loss (same seed and global batch, no dropout, no token dropped), with SGD so that
a gradient's scale shows in the loss (AdamW hides it); every rank's gradient equals its part of
the single-device model's (tests/moe_grad_probe.py); the ranks' parameters add up to the model;
the report gives each point its tokens/s and MFU (against peak_tflops=, a CPU has no known
peak); torchtitan's GPU path builds the same layouts and runs its forward
(tests/titan_cpu_probe.py); Qwen3's MoE too (gradients and torchtitan's path); on the 3-node
Slurm test cluster an expert group spans the nodes. About four minutes on 2 cores, the Slurm
test aside."""
import glob
import importlib.util
import json

import pytest

from tests import rank_probes
from tests.launching import analysis, launch, losses, rank_records

pytestmark = pytest.mark.e2e
LOSS_RTOL = 1e-5     # fp32; the splits reorder additions (seen: 2e-7)
GRAD_RTOL = 2e-5     # a gradient's difference over its largest value (seen: 1e-6)
TINY = 242_560       # tests/unit/test_deepseek_v3.py: both definitions' count
# model -> its tiny shape's parameters (test_deepseek_v3.py, test_gpt_oss.py: both definitions'
# count), its MoE layers, the SGD rate at which its 4 steps' losses fall
MODELS = {"deepseek_v3": (TINY, 1, "2.0"), "gpt_oss": (279_512, 2, "0.5")}
TOKENS = 4 * 64      # the global batch's tokens (4 sequences of 64)
SGD = ["preset=smoke", "repeats=1", "warmup_steps=1", "measure_steps=3", "batch_size=1",
       "global_batch_size=4", "model.optimizer.name=sgd", "+model.optimizer.momentum=0.0",
       "model.optimizer.weight_decay=0.0"]
COMMON = ["model=deepseek_v3", "model.optimizer.lr=2.0", *SGD]
LAYOUTS = {  # point-name suffix -> (ranks, the layout's sizes, local experts of each rank)
    "1x1-bs1-m4": (1, {"ep": 1}, [range(8)]),
    "1x2-bs1-ep2-m2": (2, {"ep": 2, "fsdp": False}, [range(4), range(4, 8)]),
    "1x2-bs1-ep2-fsdp-m2": (2, {"ep": 2, "fsdp": True}, [range(4), range(4, 8)]),
    "1x4-bs1-tp2-ep2-m2": (4, {"ep": 2, "tp": 2}, [range(4), range(4, 8)] * 2),
}
RULES = ('exclude=[{where:"model.experts % parallel.ep != 0"},'
         '{where:"gpus_per_node == 1 and (parallel.ep > 1 or parallel.tp > 1 or parallel.fsdp)"},'
         '{where:"gpus_per_node > 1 and parallel.ep == 1"},{where:"gpus_per_node == 2 and parallel.tp > 1"},'
         '{where:"gpus_per_node == 4 and (parallel.tp == 1 or parallel.fsdp)"}]')


@pytest.fixture(scope="module", params=list(MODELS))
def sweep(request, tmp_path_factory):
    """(the model, its sweep's folder)."""
    model, root = request.param, tmp_path_factory.mktemp(request.param)
    res = launch("-m", f"model={model}", f"model.optimizer.lr={MODELS[model][2]}", *SGD, "launcher=local",
                 "peak_tflops=0.1", "gpus_per_node=1,2,4", "parallel.ep=1,2,3", "parallel.tp=1,2",
                 "parallel.fsdp=false,true", RULES, f"hydra.sweep.dir={root}")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "excluded by where model.experts % parallel.ep != 0" in res.stdout + res.stderr
    return model, root


def ranks(sweep, suffix):
    model, root = sweep
    return rank_records(root, f"*-pytorch-{model}-fp32-{suffix}")


@pytest.mark.parametrize("suffix", list(LAYOUTS))
def test_every_expert_layout_trains_with_the_single_device_loss(sweep, suffix):
    n, sizes, experts = LAYOUTS[suffix]
    total = MODELS[sweep[0]][0]
    recs = ranks(sweep, suffix)
    assert len(recs) == n and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    reference = losses(ranks(sweep, "1x1-bs1-m4")[0])
    assert reference[-1] < reference[0]                        # it learns
    for r in recs:
        assert losses(r) == pytest.approx(reference, rel=LOSS_RTOL)
        lay = r["parallel"]["layout"]
        assert {k: lay[k] for k in sizes} == sizes and lay["global_batch_size"] == 4
    # each rank holds its experts, and the ranks' shares add up to the model
    assert [r["moe"]["local_experts"] for r in recs] == [list(e) for e in experts]
    counts = [r["parallel"]["parameters"] for r in recs]
    assert sum(c["owned"] for c in counts) == pytest.approx(total) and counts[0]["model"] == total
    assert sum(r["steps"][-1]["samples"] for r in recs) == 4


@pytest.mark.parametrize("suffix", list(LAYOUTS))
def test_no_token_is_dropped_and_the_all_to_all_is_timed(sweep, suffix):
    for r in ranks(sweep, suffix):
        moe = r["moe"]
        # the timed steps' global counts: every token routed to top_k = 2 experts, 3 steps, each MoE layer
        assert [sum(layer) for layer in moe["tokens_per_expert"]] == [3 * TOKENS * 2] * MODELS[sweep[0]][1]
        assert moe["timed"]["steps"] == 3 and moe["timed"]["load_max_mean"] >= 1.0
        assert [s["load_max_mean"] for s in moe["steps"]] == \
            [s["load_max_mean"] for s in ranks(sweep, "1x1-bs1-m4")[0]["moe"]["steps"]]
        assert (moe["timed"]["a2a_s"] > 0) == (r["parallel"]["layout"]["ep"] > 1)


def test_the_report_gives_each_layout_its_moe_figures_and_the_published_ones(sweep):
    res = analysis("report", str(sweep[1]), "--no-plot")
    assert res.returncode == 0, res.stderr[-3000:]
    section = res.stdout.split("## Mixture of experts")[1].split("\n## ")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| 0")]
    assert {r[2] for r in rows} == {"dp1", "dp2 x ep2", "dp2 x ep2, fsdp", "dp2 x tp2 x ep2"}
    for r in rows:
        assert float(r[8].replace(",", "")) > 0 and float(r[11].rstrip("%")) > 0   # tokens/s, MFU
        assert float(r[12]) >= 1.0                                       # expert load
        assert (r[13] == "0.0%") == (r[2] == "dp1") and r[13].endswith("%")   # all-to-all share
    assert "| dgxc_deepseek_v3 | deepseek-v3-671b-bf16-1024gpu" in section and "629.7*" in section


GRADIENT_CASES = [({"ep": 2, "fsdp": True}, 2, "deepseek_v3"), ({"tp": 2}, 2, "deepseek_v3"),
                  ({"ep": 2, "tp": 2}, 4, "deepseek_v3"), ({"ep": 2, "cp": 2}, 4, "deepseek_v3"),
                  ({"ep": 2, "tp": 2}, 4, "qwen3_moe"), ({"ep": 2, "tp": 2}, 4, "gpt_oss")]
TITAN_CASES = [({"ep": 2, "fsdp": True}, 2, "deepseek_v3", "parallelize_deepseekv3", TINY),
               ({"ep": 2, "tp": 2}, 4, "deepseek_v3", "parallelize_deepseekv3", TINY),
               ({"ep": 2, "fsdp": True}, 2, "qwen3_moe", "parallelize_qwen3", 276_928),
               ({"ep": 2, "fsdp": True}, 2, "gpt_oss", "parallelize_gptoss", MODELS["gpt_oss"][0])]


GRADIENTS, TITAN = "tests/moe_grad_probe.py", "tests/titan_cpu_probe.py"


def titan_installed() -> bool:
    try:   # finding it imports no torch
        return importlib.util.find_spec("torchtitan.models.deepseek_v3") is not None
    except ModuleNotFoundError:
        return False


@pytest.fixture(scope="module")
def probes() -> dict:
    """(probe, settings, ranks, model) -> its ranks' outputs: the gradients' cases, then
    torchtitan's where it is installed, all in one set of ranks (tests/rank_probes.py: each rank
    imports torch once for both probes); each test asserts its own ranks' number."""
    cases = [(GRADIENTS, *case) for case in GRADIENT_CASES]
    if titan_installed():   # GPT-OSS's torchtitan model trains in bf16 AMP only
        cases += [(TITAN, settings, n, model, *(["amp"] if model == "gpt_oss" else []))
                  for settings, n, model, _, _ in TITAN_CASES]
    ran = rank_probes.run(GRADIENTS, [{"probe": probe, "ranks": n, "args": [settings, 4, model, *more]}
                                      for probe, settings, n, model, *more in cases])
    return {json.dumps(case[:4]): out for case, out in zip(cases, ran)}


def probed(outputs, probe, settings, n, model):
    out, tail = outputs[json.dumps([probe, settings, n, model])]
    assert len(out) == n, tail
    return out


@pytest.mark.parametrize("settings,n,model", GRADIENT_CASES)
def test_every_gradient_is_the_single_device_ones_part(probes, settings, n, model):
    """GPT-OSS's at tp 2: its sinks split by heads, its experts' output bias replicated."""
    for r in probed(probes, GRADIENTS, settings, n, model):
        assert r["relative"] < GRAD_RTOL, r
        assert (r["compared"], r["model"]) == {"deepseek_v3": (27, TINY), "qwen3_moe": (27, 276_928),
                                               "gpt_oss": (37, MODELS["gpt_oss"][0])}[model]


@pytest.mark.parametrize("settings,n,model,parallelize,total", TITAN_CASES)
def test_torchtitans_gpu_path_builds_the_layout_and_runs_its_forward(probes, settings, n, model,
                                                                      parallelize, total):
    """torchtitan's mixtures of experts (their all-to-all dispatch) on the CPU as far as they
    go: the step stops at FlexAttention's backward (tests/titan_cpu_probe.py); GPT-OSS's in bf16
    AMP, the only precision its torchtitan model trains in (frameworks/pytorch/models/gpt_oss.py)."""
    if not titan_installed():
        pytest.skip("torchtitan is not installed: `make venv` installs requirements-torchtitan.txt")
    out = probed(probes, TITAN, settings, n, model)
    for r in out:
        assert r["record"]["implementation"] == f"torchtitan 0.3.0 ({parallelize})"
        assert r["record"]["parameters"]["model"] == total and r["forward_loss"] > 0
        assert "FlexAttention does not support backward on CPU" in r["step"]
    if settings.get("fsdp"):   # FSDP over dp 2, the experts over ep 2: half of everything each
        assert [r["record"]["parameters"]["held"] for r in out] == [total // 2] * 2


def test_an_impossible_expert_layout_is_refused_in_one_line(tmp_path):
    res = launch(*COMMON, "launcher=local", "gpus_per_node=4", "parallel.ep=3", f"hydra.run.dir={tmp_path}")
    assert res.returncode != 0 and not glob.glob(f"{tmp_path}/points/*/repeat-00")
    [line] = [x for x in res.stderr.splitlines() if x.strip()]
    assert line.lower().startswith("error: dp x cp x tp = edp x ep (torchtitan's dp_shard x cp x tp = efsdp x "
                                   "ep): ep = 3 does not divide dp x cp x tp = 4 x 1 x 1 = 4; experts % ep = 0: "
                                   "8 % 3 = 2")


@pytest.mark.slurm
def test_an_expert_group_across_nodes_on_the_slurm_test_cluster(slurm_cluster, tmp_path):
    """3 nodes x 2: tp 2 inside each node, ep 3 over a stage's 6 ranks (expert groups 0-2 and
    3-5, each over two nodes), 6 experts: the single-device loss."""
    shape = ["model.experts=6", "global_batch_size=3"]
    one = launch(*COMMON, *shape, "launcher=local", f"hydra.run.dir={tmp_path / 'one'}")
    assert one.returncode == 0, one.stderr[-3000:]
    res = launch(*COMMON, *shape, "launcher=slurm", "cluster=localtest", "nodes=3", "gpus_per_node=2",
                 "parallel.tp=2", "parallel.ep=3", f"hydra.run.dir={tmp_path / 'grid'}", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    res = launch("status", str(tmp_path / "grid"), "--wait", "--timeout", "300", "--interval", "1",
                 timeout=330)
    assert "COMPLETED" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]
    [reference] = ranks(("deepseek_v3", tmp_path / "one"), "1x1-bs1-m3")
    recs = ranks(("deepseek_v3", tmp_path / "grid"), "3x2-bs1-tp2-ep3")
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    hosts = [r["host"] for r in recs]
    assert hosts[0] == hosts[1] != hosts[2] == hosts[3] != hosts[4] == hosts[5]
    assert [r["parallel"]["expert_coords"]["ep"] for r in recs] == [0, 1, 2, 0, 1, 2]
    assert [r["moe"]["local_experts"] for r in recs] == [[0, 1], [2, 3], [4, 5]] * 2
    for r in recs:
        assert losses(r) == pytest.approx(losses(reference), rel=LOSS_RTOL)
    assert sum(r["parallel"]["parameters"]["owned"] for r in recs) == \
        pytest.approx(reference["parallel"]["parameters"]["model"])
