"""The language models under torch 2.11, as the lent GPU machines carry it (issues 42, 51):
torchtitan 0.3.0 does not load there, 0.2.2 does and the environment carries it, so a GPU point
trains Llama 3 and DeepSeek-V3 through 0.2.2 and Qwen3's MoE and GPT-OSS (and every model, where
0.3.0 is what is installed) through the suite's own definitions with torch's FSDP2, TP, PP, CP
and EP, its record saying why (frameworks/pytorch/titan/session.py: choose; releases.py);
torchtitan 0.2.2 builds tiny Llama 3 and DeepSeek-V3 on two CPU ranks as 0.3.0's tests do
(tests/titan_cpu_probe.py); and the suite's definitions import, build and train tiny Llama 3, DeepSeek-V3, Qwen3-MoE and GPT-OSS at every
layout in torch 2.11 (a real sweep, `framework.python` its interpreter, on this CPU), every
layout of a model at the same loss; and DCP's async checkpoints save, load and check more than
once (torch 2.11's stager stages only once). torch 2.11's environment: `make env-torch-2.11`."""
import glob
import json
import math
import os
import subprocess

import pytest

from tests import rank_probes
from tests.frameworks_env import ROOT, model_cfg, require_torch_211
from tests.launching import launch, losses, rank_records

pytestmark = pytest.mark.e2e
LOSS_RTOL = 1e-5
FLEX_CPU = "FlexAttention does not support backward on CPU"
# the parts of the suite's .venv a GPU machine gets as wheels (requirements-torchtitan.txt)
TITAN_PACKAGES = ("torchtitan", "spmd_types", "tyro", "docstring_parser", "typeguard")
LAYOUTS = {"llama3": ["fsdp", "tp2-m2", "pp2-m2", "cp2-m2"], "deepseek_v3": ["ep2-fsdp", "tp2-m2"],
           "qwen3_moe": ["ep2-fsdp"], "gpt_oss": ["ep2-fsdp"]}
CHOICE = """
import importlib, json, sys
from frameworks.pytorch.titan import session as titan
from tests.runspecs import run_spec
out = {}
for name, cfg in json.loads(sys.argv[1]).items():
    family = importlib.import_module(f"frameworks.pytorch.models.{name}")
    out[name] = {device: titan.choose(run_spec(model=cfg, device=device), family) for device in ("cuda", "cpu")}
out["unavailable"] = titan.unavailable()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def titan_site(tmp_path_factory):
    """torchtitan 0.3.0 and its pure-Python needs from the suite's .venv, on a path of their
    own ahead of torch 2.11's environment and its 0.2.2: an image that carries 0.3.0."""
    import importlib.util
    site = tmp_path_factory.mktemp("titan-site")
    for name in TITAN_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None:
            pytest.skip(f"{name} is not installed in the suite's .venv (requirements-torchtitan.txt)")
        origin = os.path.dirname(spec.origin) if spec.submodule_search_locations else spec.origin
        for path in [origin, *glob.glob(os.path.join(os.path.dirname(origin), f"{name}-*.dist-info"))]:
            os.symlink(path, site / os.path.basename(path))   # its metadata too: its version
    return site


def choices(python, pythonpath):
    cfgs = {name: model_cfg(name, "tiny") for name in LAYOUTS}
    res = subprocess.run([python, "-c", CHOICE, json.dumps(cfgs)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, PYTHONPATH=pythonpath))
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def test_a_gpu_point_takes_torchtitan_0_2_2_where_it_builds_the_model():
    python = require_torch_211()
    out = choices(python, str(ROOT))
    assert out.pop("unavailable") is None
    own = ": the suite's own definition on the GPU, with torch's FSDP2, TP, PP, CP and EP"
    for name, choice in out.items():
        use, why = choice["cuda"]
        if name in ("llama3", "deepseek_v3"):
            assert use is True and why.startswith("torchtitan 0.2.2 loads with torch 2.11"), (name, why)
        else:
            assert (use, why) == (False, f"torchtitan 0.2.2 does not build {name} here (frameworks/pytorch/"
                                         "titan/releases.py: its path builds llama3 and deepseek_v3)" + own)
        assert choice["cpu"][0] is False and choice["cpu"][1].startswith("a CPU rank")


def test_where_0_3_0_is_installed_a_gpu_point_chooses_the_suites_definitions_and_says_why(titan_site):
    python = require_torch_211()
    out = choices(python, f"{titan_site}:{ROOT}")   # 0.3.0 ahead of the environment's 0.2.2
    # the torch the release declares it needs holds: 0.3.0 does not load here
    unavailable = out.pop("unavailable")
    assert unavailable.startswith("torchtitan 0.3.0 with torch 2.11") and "DataParallelMeshDims" in unavailable
    for name, choice in out.items():
        use, why = choice["cuda"]
        assert use is False, (name, why)
        assert why.startswith("torch 2.11") and "is older than 2.13.0, the oldest this worker supports on " \
            "torchtitan's path" in why and "DataParallelMeshDims" in why, why
        assert why.endswith("the suite's own definition on the GPU, with torch's FSDP2, TP, PP, CP and EP")
        assert choice["cpu"] == [False, "a CPU rank: torchtitan's path is the GPU's (its FlexAttention "
                                        "has no CPU backward)"]


# model -> (its layout on two ranks, torchtitan 0.2.2's parallelize function, its parameters:
# those of 0.3.0 and the suite's definition, tests/integration/test_llama3_torchtitan_cpu.py,
# test_moe_layouts.py)
TITAN_022 = {"llama3": ({"fsdp": True}, "parallelize_llama", 226_624),
             "deepseek_v3": ({"ep": 2, "fsdp": True}, "parallelize_deepseekv3", 242_560)}


def test_torchtitan_0_2_2_builds_tiny_llama3_and_deepseek_v3_on_two_cpu_ranks():
    """torchtitan 0.2.2's models, parallelize functions and FSDP2 (and its experts over ep) on
    two CPU ranks over gloo, both models in the same two (tests/rank_probes.py): each rank
    holds half the parameters, which total 0.3.0's; Llama 3's forward gives each rank its part
    of the global batch's mean loss (so the two add up to about ln(vocabulary) at
    initialisation, not twice it); DeepSeek-V3's optimizer gets 0.2.2's load-balancing hook;
    stops at 0.2.2's router (torch.histc of the expert indices, which the CPU has not for
    integers), and both steps at FlexAttention's backward, which torch has only on GPUs."""
    python = require_torch_211()
    ran = rank_probes.run("tests/titan_cpu_probe.py",
                          [{"ranks": 2, "args": [settings, 2, json.dumps(model_cfg(model, "tiny"))]}
                           for model, (settings, _, _) in TITAN_022.items()], python=python)
    for model, (ranks, tail) in zip(TITAN_022, ran):
        assert len(ranks) == 2, tail
        _, parallelize, total = TITAN_022[model]
        for r in ranks:
            assert r["record"]["implementation"] == f"torchtitan 0.2.2 ({parallelize})"
            assert r["record"]["parameters"] == {"model": total, "held": total // 2}
            assert FLEX_CPU in r["step"], r["step"]
            assert r["optimizer_hooks"] == (model == "deepseek_v3")   # its expert-bias update, before each step
        if model == "llama3":
            chance = math.log(model_cfg(model, "tiny")["vocab_size"])
            assert 0.5 * chance < sum(r["forward_loss"] for r in ranks) < 1.5 * chance, ranks
        else:
            assert all(r["forward"] == "NotImplementedError: \"histogram_cpu\" not implemented for 'Long'"
                       for r in ranks), ranks


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    python = require_torch_211()
    root = tmp_path_factory.mktemp("torch211")
    common = ["model.size=tiny", "launcher=local", f"framework.python={python}", "device=cpu",
              "gpus_per_node=2", "repeats=1", "warmup_steps=1", "measure_steps=2", "batch_size=2",
              "global_batch_size=4"]
    runs = {"llama3": ["model=llama3", "parallel.fsdp=false,true", "parallel.tp=1,2", "parallel.pp=1,2",
                       "parallel.cp=1,2",
                       'exclude=[{where:"parallel.tp * parallel.pp * parallel.cp * (1 + parallel.fsdp) != 2"}]'],
            "moe": ["model=deepseek_v3,qwen3_moe,gpt_oss", "parallel.ep=1,2", "parallel.tp=1,2", "parallel.fsdp=false,true",
                    'exclude=[{where:"parallel.ep * parallel.tp != 2 or parallel.fsdp != (parallel.ep == 2)"},'
                    '{model.name:qwen3_moe,parallel.tp:2},{model.name:gpt_oss,parallel.tp:2}]'],
            "checkpoint": ["model=llama3", "bench=checkpoint", "checkpoint.mode=async", "parallel.fsdp=true"]}
    for name, args in runs.items():
        res = launch("-m", *common, *args, f"hydra.sweep.dir={root / name}")
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return root


@pytest.mark.parametrize("model", list(LAYOUTS))
def test_the_suites_definitions_train_every_layout_in_torch_2_11(sweep, model):
    folder = sweep / ("llama3" if model == "llama3" else "moe")
    first = None
    for suffix in LAYOUTS[model]:
        recs = rank_records(folder, f"*-pytorch-{model}-fp32-1x2-bs2-{suffix}")
        assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), (suffix, [r.get("error") for r in recs])
        for r in recs:
            assert r["framework"]["version"].startswith("2.11"), r["framework"]
            assert r["parallel"]["implementation"].startswith(f"dlbench {model}")
            assert r["parallel"]["implementation_reason"].startswith("a CPU rank")
            first = first or losses(r)
            assert losses(r) == pytest.approx(first, rel=LOSS_RTOL), suffix


def test_async_checkpoints_save_more_than_once_in_torch_2_11(sweep):
    """bench=checkpoint's warm-up save and its timed one through DCP's async_save, FSDP over 2
    ranks: torch 2.11's DefaultStager closes itself after a stage, and the second save failed
    with "KeyError: <class 'type'>" before each save got a stager of its own there."""
    recs = rank_records(sweep / "checkpoint", "*-checkpoint-pytorch-llama3-*")
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    for r in recs:
        ck = r["checkpoint"]
        assert r["framework"]["version"].startswith("2.11") and ck["mode"] == "async"
        assert len(ck["warmup"]) == 1 and ck["equal"] is True and ck["blocked_s"] > 0
