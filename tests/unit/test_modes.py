"""contract/modes.py: the rule of compile, each framework's modes as its adapter declares
them (frameworks/<name>/__init__.py), what compile=auto picks, and the recipe's switches
(clipping, BERT's gathered positions) every adapter records."""
import pytest

from contract import modes
from frameworks import registry

@pytest.mark.parametrize("framework", registry.names())
def test_mode_defaults_per_framework(framework):
    """Its modes as its row in tests/frameworks_env.py says (compile=false, true, auto)."""
    from tests.frameworks_env import FRAMEWORKS
    off, on, auto = FRAMEWORKS[framework].modes
    fw = registry.get(framework).modes
    assert fw.compiled(False) is False and fw.compiled(True) is True
    assert fw.name(False) == off and fw.name(True) == on
    assert fw.recommended == auto
    assert fw.name(fw.compiled("auto")) == auto == fw.name(fw.compiled("AUTO"))


def test_every_framework_of_the_suite_has_its_row():
    from tests.frameworks_env import FRAMEWORKS
    assert set(registry.names()) == set(FRAMEWORKS)


@pytest.mark.parametrize("value,setting", [
    ("auto", "auto"), ("AUTO", "auto"), (True, True), (False, False), ("true", True),
    ("False", False)])
def test_settings(value, setting):
    assert modes.setting(value) == setting


@pytest.mark.parametrize("value", ["yes", "", 1, 0, None, "xla"])
def test_a_bad_setting_is_one_line(value):
    with pytest.raises(ValueError, match=r"^compile must be auto, true or false, got "):
        modes.setting(value)


def test_an_adapter_that_declares_no_modes_runs_eager_under_auto():
    site = modes.Modes()   # a site's own adapter's default
    assert site.compiled("auto") is False and site.compiled(True) is True
    assert (site.name(False), site.name(True), site.recommended) == ("eager", "compiled", "eager")


@pytest.mark.parametrize("off,on", [("eagr", "jit"), ("eager", "XLA"), ("eager", "")])
def test_a_mode_outside_the_vocabulary_is_one_line(off, on):
    with pytest.raises(ValueError) as info:
        modes.Modes(off, on)
    bad = off if off not in modes.NAMES else on
    assert str(info.value) == (f"unknown mode {bad!r}: a mode is one of {', '.join(modes.NAMES)} "
                               "(contract/modes.py)")


def test_a_bad_compile_setting_is_one_line_through_an_adapter_too():
    with pytest.raises(ValueError, match=r"^compile must be auto, true or false, got 'yes'$"):
        registry.get("jax").modes.compiled("yes")


def test_clipping_and_the_recipe_environment():
    from tests.frameworks_env import model_cfg
    bert = model_cfg("bert_base", "tiny")
    assert modes.clip_norm(bert) == 1.0
    assert modes.recipe_environment(bert) == {"clip_grad": True, "clip_norm": 1.0,
                                              "max_predictions_per_seq": 20}
    assert modes.clip_norm(dict(bert, clip_grad=False)) is None  # DLPerf's "W/O clip"
    assert modes.recipe_environment(dict(bert, clip_grad=False))["clip_grad"] is False
    assert modes.recipe_environment(model_cfg("resnet50", "tiny")) == {"clip_grad": False,
                                                                      "clip_norm": None}
    assert model_cfg("bert_base", "full")["max_predictions_per_seq"] == 20
    with pytest.raises(ValueError, match="clip_norm must be > 0"):
        modes.clip_norm(dict(bert, clip_norm=0))
