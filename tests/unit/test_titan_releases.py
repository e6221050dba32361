"""Which torchtitan release the GPU path drives, and what it needs (frameworks/pytorch/titan/
releases.py); 0.2.2's arguments of a shape (v022.py) are checked against torchtitan 0.2.2 itself
in torch 2.11's environment (tests/integration/test_torch_2_11.py)."""
import pytest

from frameworks.pytorch.models import deepseek_v3, gpt_oss, llama3, qwen3_moe
from frameworks.pytorch.titan import releases
from frameworks.pytorch.titan import session as titan
from tests.frameworks_env import model_cfg
from tests.runspecs import run_spec


@pytest.mark.parametrize("version,driven", [("0.3.0", "0.3.0"), ("0.3.1", "0.3.0"), ("0.4.0", "0.3.0"),
                                            ("0.2.2", "0.2.2"), ("0.2.9", "0.2.2"), ("0.2.1", None),
                                            ("0.1.0", None)])
def test_a_version_is_driven_as_the_newest_release_not_newer_than_it(version, driven):
    release = releases.of(version)
    assert (release.version if release else None) == driven


def test_each_release_says_which_torch_loads_it():
    assert releases.torch_gap(releases.V030, "2.13.0+cpu") is None
    assert releases.torch_gap(releases.V030, "2.11.0+cu130") == (
        "torch 2.11.0+cu130 is older than 2.13.0, the oldest this worker supports on torchtitan's path "
        "(Llama 3 and the MoE models on GPUs) (torchtitan 0.3.0 imports torch.distributed.fsdp's "
        "DataParallelMeshDims, new in 2.13)")
    assert releases.torch_gap(releases.V022, "2.11.0+cu130") is None
    assert releases.torch_gap(releases.V022, "2.10.0").startswith("torch 2.10.0 is older than 2.11.0")


def test_0_2_2_builds_llama3_and_deepseek_v3_untied_and_names_the_rest():
    spec = run_spec(model=model_cfg("llama3", "tiny"), device="cuda")
    assert releases.V022.builds_not(spec, llama3) is None
    assert releases.V022.builds_not(spec, deepseek_v3) is None
    for family in (qwen3_moe, gpt_oss):
        assert releases.V022.builds_not(spec, family) == (
            f"does not build {family.__name__.rsplit('.', 1)[1]} here (frameworks/pytorch/titan/releases.py: "
            "its path builds llama3 and deepseek_v3)")
    tied = run_spec(model=model_cfg("llama3", "1b"), device="cuda")
    assert releases.V022.builds_not(tied, llama3) == "does not tie the output to the embedding (Llama 3.2 1B's)"
    assert releases.V030.builds_not(tied, llama3) is None and releases.V030.builds_not(spec, gpt_oss) is None


def test_a_release_checks_its_own_imports_and_a_families_parallelize_function():
    assert releases.V030.references(llama3) == ()
    assert releases.V030.references(deepseek_v3)[:2] == (deepseek_v3.TITAN_PARALLELIZE, deepseek_v3.TITAN_SHARDING)
    assert releases.V022.references(deepseek_v3) == ("torchtitan.models.deepseek_v3:parallelize_deepseekv3",)


def test_the_suites_environment_drives_0_3_0():
    pytest.importorskip("torchtitan")
    assert releases.current() is releases.V030
    assert titan.for_release(titan.TitanSession, releases.V030) is titan.TitanSession
    assert titan.unavailable() is None and titan.unavailable(deepseek_v3) is None


def _pins(path) -> dict:
    import re
    out = {}
    for line in open(path):
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if m:
            out[m[1].lower().replace("_", "-")] = m[2]
    return out


def test_the_gpu_wheels_carry_the_release_the_lent_machines_torch_loads():
    """`make gpu-wheels` (benchmarks/gpu_check/wheels.txt) is for the lent machines' torch, the
    one tests/versions/torch-2.11 pins: its torchtitan is the release that torch loads, and
    every package both files pin has one version."""
    from tests.frameworks_env import ROOT
    wheels = _pins(ROOT / "benchmarks" / "gpu_check" / "wheels.txt")
    lent = _pins(ROOT / "tests" / "versions" / "torch-2.11" / "requirements.txt")
    release = releases.of(wheels["torchtitan"])
    assert release is releases.V022 and releases.torch_gap(release, lent["torch"]) is None
    assert releases.torch_gap(releases.V030, lent["torch"]) is not None   # 0.3.0 would not load there
    assert {k: v for k, v in wheels.items() if k in lent} == {k: lent[k] for k in wheels if k in lent}
