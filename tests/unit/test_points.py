"""Config -> point -> run spec, and the validation of whole points."""
import pytest
from hydra import compose, initialize_config_dir

from contract import spec as specs
from contract.point import Framework, Point
from launchers.backends import worker
from launchers.driver import run_spec
from launchers.plan import checks, points
from launchers.suite import ROOT

CONF = str(ROOT / "conf")


def cfg_of(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base=None):
        return compose("config", overrides=list(overrides))


def test_point_and_spec(tmp_path):
    cfg = cfg_of("preset=smoke", "model=bert_base", "precision=amp", "gpus_per_node=2")
    point = points.make_point(cfg, tmp_path, 7)
    assert point.name == "007-pytorch-bert_base-amp-1x2-bs4"
    assert point.model.hidden == 128 and "sizes" not in point.model
    assert point.world_size == 2 and point.repeats == 2
    spec = run_spec.of(point, 1).as_dict()
    assert spec["repeat"] == 1 and spec["record_dir"].endswith("/repeat-01")
    assert all(k in spec for k in specs.REQUIRED)


def test_full_size_is_the_default():
    m = points.resolve_model(cfg_of("model=resnet50").model)
    assert (m["layers"], m["width"], m["image_size"], m["num_classes"]) == ([3, 4, 6, 3], 64, 224, 1000)


@pytest.mark.parametrize("override,message", [
    ("model.size=huge", "unknown model.size 'huge'"),
    ("precision=amp", None),
    ("device=tpu", "device must be auto, cpu or cuda"),
    ("timeout_s=0", "timeout_s must be an integer >= 1"),
])
def test_validate(override, message):
    cfg = cfg_of(override)
    if message is None:
        checks.validate(cfg)
    else:
        with pytest.raises(points.ConfigError, match=message):
            checks.validate(cfg)


def test_missing_interpreter_is_named(tmp_path):
    point = points.make_point(cfg_of(), tmp_path, 0)
    point = point.replace(framework=Framework("tensorflow", python=".venvs/nowhere/bin/python"))
    with pytest.raises(worker.WorkerUnavailable,
                       match=r"^tensorflow interpreter \.venvs/nowhere/bin/python not found$"):
        worker.worker_argv(point, "spec.json", "python3")   # no make target builds .venvs/nowhere
    assert worker._builder(".venvs/tensorflow/bin/python") == " (make env-tensorflow builds it)"
    assert worker._builder(".venvs/jax-0.4.38/bin/python") == " (make env-jax-0.4.38 builds it)"


@pytest.mark.parametrize("framework,compile,setting,compiled,mode", [
    ("pytorch", None, "auto", False, "eager"),          # the default: compile=auto
    ("jax", None, "auto", True, "jit"),
    ("mindspore", None, "auto", True, "graph"),
    ("oneflow", None, "auto", True, "graph"),
    ("mxnet", None, "auto", True, "hybridize"),
    ("tensorflow", None, "auto", False, "tf.function"),
    ("paddle", None, "auto", False, "eager"),
    ("pytorch", "true", True, True, "torch.compile"),   # explicit settings keep their meaning
    ("jax", "false", False, False, "eager"),
    ("tensorflow", "true", True, True, "xla"),
])
def test_compile_auto_is_resolved_when_the_point_is_made(tmp_path, framework, compile, setting,
                                                         compiled, mode):
    """The point keeps `compile` as the resolved bool (so its name ends in -compile when
    compiled, auto or not), the setting as given, and the mode's name; the spec carries both."""
    overrides = ["preset=smoke", f"framework={framework}"] + ([f"compile={compile}"] if compile else [])
    point = points.make_point(cfg_of(*overrides), tmp_path, 3)
    assert point.compile is compiled and point.compile_setting == setting
    assert point.mode == mode
    assert point.name == f"003-{framework}-resnet50-fp32-1x1-bs4" + ("-compile" if compiled else "")
    spec = run_spec.of(point, 0).as_dict()
    assert (spec["compile"], spec["compile_setting"], spec["mode"]) == (compiled, setting, mode)


def test_the_default_is_auto():
    assert cfg_of().compile == "auto"


def test_a_point_written_before_auto_still_makes_a_spec(tmp_path):
    point = points.make_point(cfg_of("framework=jax", "compile=true"), tmp_path, 0).as_dict()
    for key in ("compile_setting", "mode"):
        del point[key]
    spec = run_spec.of(Point.from_dict(point), 0).as_dict()
    assert (spec["compile_setting"], spec["mode"]) == (True, "jit")


@pytest.mark.parametrize("override,message", [
    ("compile=yes", "compile must be auto, true or false, got 'yes'"),
    ("compile=1", "compile must be auto, true or false, got 1"),
    ("model.clip_norm=0", "model.clip_norm must be a number > 0, got 0"),
    ("model.max_predictions_per_seq=0", "model.max_predictions_per_seq must be an integer >= 1"),
    ("model.clip_grad=maybe", "model.clip_grad must be true or false"),
])
def test_bad_compile_and_recipe_values_are_one_line(override, message):
    cfg = cfg_of("model=bert_base", override)
    with pytest.raises(points.ConfigError, match=message):
        checks.validate(cfg)


def test_a_framework_without_an_adapter_is_one_line(tmp_path):
    with pytest.raises(points.ConfigError) as info:
        points.make_point(cfg_of("preset=smoke", "framework.name=caffe"), tmp_path, 0)
    assert str(info.value) == ("framework=caffe has no adapter (no frameworks/caffe/__init__.py; the "
                               "suite's: jax, mindspore, mxnet, oneflow, paddle, pytorch, tensorflow)")


@pytest.mark.parametrize("override,problem", [
    ("compile=auto", None), ("compile=true", None), ("compile=false", None),
    ("compile=maybe", "compile must be auto, true or false, got 'maybe'"),
])
def test_precheck_refuses_a_bad_compile_value(tmp_path, override, problem):
    from launchers.plan import precheck
    assert precheck.check([override, f"output_root={tmp_path}"]) == problem


def test_bert_clips_and_gathers_by_default():
    m = points.resolve_model(cfg_of("model=bert_base", "preset=smoke").model)
    assert (m["clip_grad"], m["clip_norm"], m["max_predictions_per_seq"], m["seq_len"]) == \
        (True, 1.0, 20, 128)
    off = points.resolve_model(cfg_of("model=bert_base", "model.clip_grad=false").model)
    assert off["clip_grad"] is False


def test_batch_size_max_is_a_search_of_the_batch_from_8(tmp_path):
    point = points.make_point(cfg_of("preset=smoke", "batch_size=max"), tmp_path, 0)
    assert point.batch_size == 8   # the search's settings, whole once the point is made
    assert point.search == {"key": "batch_size", "start": 8, "max": 8 * 2**20, "tolerance": 0.05}
    with pytest.raises(points.ConfigError, match="batch_size=max is itself a search"):
        points.make_point(cfg_of("batch_size=max", "search={key:model.num_classes}"), tmp_path, 0)
