"""Config -> point -> run spec, and the validation of whole points."""
import pytest
from hydra import compose, initialize_config_dir

from frameworks.common import records
from launchers import points

CONF = str(points.ROOT / "conf")


def cfg_of(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base=None):
        return compose("config", overrides=list(overrides))


def test_point_and_spec(tmp_path):
    cfg = cfg_of("preset=smoke", "model=bert_base", "precision=amp", "gpus_per_node=2")
    point = points.make_point(cfg, tmp_path, 7)
    assert point["point"] == "007-pytorch-bert_base-amp-1x2-bs4"
    assert point["model"]["hidden"] == 128 and "sizes" not in point["model"]
    assert point["world_size"] == 2 and point["repeats"] == 2
    spec = points.run_spec(point, 1)
    assert spec["repeat"] == 1 and spec["record_dir"].endswith("/repeat-01")
    assert all(k in spec for k in records.SPEC_KEYS)


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
        points.validate(cfg)
    else:
        with pytest.raises(points.ConfigError, match=message):
            points.validate(cfg)


def test_missing_interpreter_is_named(tmp_path):
    point = points.make_point(cfg_of(), tmp_path, 0)
    point["framework"] = {"name": "tensorflow", "python": ".venvs/nowhere/bin/python"}
    with pytest.raises(points.WorkerUnavailable, match="make env-tensorflow"):
        points.worker_argv(point, "spec.json", "python3")
