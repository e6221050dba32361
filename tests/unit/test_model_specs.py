"""One spec per model (contract/models/): the lookup, each spec against the rest of the tree
(its config, the frameworks whose adapters train it, the report's sections, the gate's metrics),
and each FLOP count against the figures worked by hand in test_flops.py, test_llama3.py,
test_deepseek_v3.py, test_qwen3_moe.py and test_gpt_oss.py."""
import ast
import os

import pytest

from analysis.gate import compare
from analysis.figures import flops
from analysis.sections import special
from contract import models
from frameworks import registry
from frameworks.registry import resolve
from tests.frameworks_env import model_cfg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_model_is_found_by_its_module_and_an_unknown_one_is_one_line():
    assert models.get("gpt").name == "gpt" and models.find("gpt") is models.get("gpt")
    assert set(models.names()) >= {"resnet50", "bert_base", "gpt", "llama3", "deepseek_v3", "qwen3_moe",
                                   "gpt_oss", "wide_deep", "insightface"}
    with pytest.raises(models.UnknownModel) as err:
        models.get("gpt9")
    line = str(err.value)
    assert line.startswith("unknown model 'gpt9': no contract/models/gpt9.py declares it (known: ")
    assert "llama3" in line and "\n" not in line
    assert models.find("gpt9") is None and models.find(None) is None
    assert models.named(lambda s: s.experts) == ("deepseek_v3", "gpt_oss", "qwen3_moe")
    assert models.published("llama3.1") is models.get("llama3") and models.published("x") is None


def test_the_planner_asks_the_registry_which_frameworks_train_a_model():
    registry.check_model("resnet50", "mindspore")
    with pytest.raises(ValueError, match="^model=llama3 is built for framework=pytorch only, not jax$"):
        registry.check_model("llama3", "jax")
    with pytest.raises(models.UnknownModel):
        registry.check_model("nomodel", "pytorch")


def test_a_spec_that_contradicts_itself_is_refused():
    with pytest.raises(ValueError, match="unknown parallel axes xp"):
        models.ModelSpec(name="m", pytorch_session="x:y", layouts=("xp",))


def test_every_model_config_has_a_spec_and_every_spec_a_config():
    confs = {f[:-5] for f in os.listdir(os.path.join(ROOT, "conf", "model")) if f.endswith(".yaml")}
    assert confs == set(models.names())
    for name in models.names():
        assert models.get(name).name == name      # the module's name is the model's


def _framework_models(framework: str) -> set:
    """The keys of a framework's own implementation table (its models.py MODELS), read
    without importing the framework."""
    tree = ast.parse(open(os.path.join(ROOT, "frameworks", framework, "models.py")).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "MODELS" for t in node.targets):
            return {k.value for k in node.value.keys}
    return set()


@pytest.mark.parametrize("name", models.names())
def test_a_spec_agrees_with_the_tree(name):
    spec = models.get(name)
    assert registry.frameworks_of(name), name   # some framework trains it
    for framework in registry.frameworks_of(name):
        if framework != "pytorch":   # the others: their own table builds it
            assert name in _framework_models(framework), framework
    # a PyTorch session exactly where PyTorch's adapter trains it
    assert (spec.pytorch_session is not None) == ("pytorch" in registry.frameworks_of(name))
    if spec.pytorch_session:
        assert callable(resolve(spec.pytorch_session))   # imports the PyTorch module it names
        # beside its definition: frameworks/pytorch/models/<name>.py, or a package of that name
        assert spec.pytorch_session.split(":")[0].split(".")[:4] == ["frameworks", "pytorch", "models", name]
    assert spec.report is None or spec.report in special.SECTIONS
    assert spec.metric in compare.METRICS
    assert set(spec.tp_divides) <= set(model_cfg(name, _a_size(name)))
    assert not spec.experts or "ep" in spec.layouts
    others = [n for n in models.names() if n != name]
    assert not set(spec.published) & {k for n in others for k in models.get(n).published}


def test_every_framework_table_model_is_a_model_its_adapter_trains():
    for framework in registry.names():
        assert set(registry.get(framework).models) <= set(models.names()), framework
        if os.path.isfile(os.path.join(ROOT, "frameworks", framework, "models.py")):
            assert _framework_models(framework) == set(registry.get(framework).models), framework


def _a_size(name):
    import yaml
    with open(os.path.join(ROOT, "conf", "model", f"{name}.yaml")) as f:
        return yaml.safe_load(f)["size"]


# model, size -> training FLOPs of one sample, as the tests named above work them out by hand
BY_HAND = {
    ("resnet50", "full"): 24_535_105_536,             # 3 x 2 x 4,089,184,256 multiply-adds
    ("resnet50", "tiny"): 13_965_312,                 # 6 x 2,327,552
    ("bert_base", "full"): 69_928_989_696,            # 3 x 23,309,663,232 (the MLM head gathered)
    ("bert_base", "tiny"): 369_747_456,               # 3 x 123,249,152
    # the language models by contract/flops.py's one convention: the causal pairs, no recompute
    ("gpt", "full"): 7_151_422_537_728,               # 72 s l h^2 + 12 l h s (s+1)/2 + 6 s h V, DLPerf's DP case
    ("llama3", "8b"): 51_472_785_408 * 8192,          # 6 N s + 12 l h s (s+1)/2 (test_llama3.py)
    ("deepseek_v3", "671b"): 249_818_800_128 * 4096,  # NeMo's terms, the causal pairs, no MTP
    ("qwen3_moe", "30b_a3b"): 23_007_461_376 * 4096,
    ("gpt_oss", "20b"): 24_120_709_632 * 8192,        # the window counted per layer (test_gpt_oss.py)
    ("gpt_oss", "tiny"): 52_887_552 + 4_583_424,
}


@pytest.mark.parametrize("name,size", list(BY_HAND))
def test_each_specs_flop_count_is_the_hand_figure(name, size):
    cfg = model_cfg(name, size)
    assert models.get(name).flops_per_sample(cfg) == flops.flops_per_sample(cfg) == BY_HAND[name, size]


def test_every_model_with_a_count_has_a_hand_figure_and_the_others_none():
    counted = models.named(lambda s: s.flops is not None)
    assert counted == tuple(sorted({name for name, _ in BY_HAND}))
    for name in set(models.names()) - set(counted):
        assert flops.flops_per_sample(model_cfg(name, _a_size(name))) is None
    # a setting the count needs, unset: no count rather than a wrong one
    assert flops.flops_per_sample(dict(model_cfg("gpt", "tiny"), vocab_size=None)) is None
    assert flops.flops_per_sample({"name": "gpt9", "layers": 2}) is None


@pytest.mark.parametrize("name", registry.get("pytorch").models)
def test_every_pytorch_model_trains_a_step_through_the_session_its_spec_names(name):
    """One rank, the tiny size: PyTorch's worker finds the session by the spec alone."""
    import torch

    from contract import parallel
    from frameworks.common.distenv import DistEnv
    from frameworks.pytorch import worker
    from tests.runspecs import run_spec
    batch = 2
    layout, bad = parallel.resolve({}, 1, batch)
    assert bad == []
    spec = run_spec(model=model_cfg(name, "tiny"), precision="fp32", amp_dtype=None, compile=False,
                    batch_size=batch, seed=0, device="cpu", rendezvous_timeout_s=30,
                    parallel=layout.as_dict())
    session = worker.model_session(spec, DistEnv(0, 1, 0, 1, "127.0.0.1", 1))
    assert torch.isfinite(torch.tensor(session.loss_value(session.step())))


def test_the_worker_imports_torch_before_the_memory_cap_and_no_layout_module():
    """The harness caps a rank's memory (memory_limit_mb) from what it had imported once the
    adapter's worker is loaded: torch and the sessions of the models without layouts come
    with it, the modules of layouts only with a language model's session."""
    import subprocess
    import sys
    code = ("import sys; import frameworks.pytorch.worker; "
            "print(all(m in sys.modules for m in ('torch', 'frameworks.pytorch.session', "
            "'frameworks.pytorch.models.wide_deep', 'frameworks.pytorch.models.insightface')), "
            "'torch.distributed.pipelining' in sys.modules, "
            "'frameworks.pytorch.lm_session' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "False", "False"], out.stderr[-2000:]
