"""data=files: the point's checks (one line, before anything runs), the shared rules of
frameworks/common/datafiles.py (disjoint shards, wrap-around, the ids' digest), a
framework without a pipeline answering `unsupported`."""
import os
import random
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

from frameworks import registry
from frameworks.common import datafiles, distenv, harness
from launchers.driver.run_spec import of as spec_of
from launchers.plan import checks, points
from launchers.suite import ROOT
from tests.runspecs import run_spec, stand_in

CONF = str(ROOT / "conf")


def cfg_of(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base=None):
        return compose("config", overrides=list(overrides))


@pytest.fixture
def images(tmp_path):
    folder = tmp_path / "ds" / "train" / "n00000000"
    folder.mkdir(parents=True)
    (folder / "a.JPEG").write_bytes(b"not decoded by the checks")
    return tmp_path / "ds"


def test_synthetic_is_the_default(tmp_path):
    point = points.make_point(cfg_of("preset=smoke"), tmp_path, 0)
    assert point.config.data.source == "synthetic"
    assert point.name == "000-pytorch-resnet50-fp32-1x1-bs4"


def test_files_point_is_named_and_its_path_made_absolute(images, tmp_path, monkeypatch):
    monkeypatch.chdir(images.parent)
    point = points.make_point(cfg_of("data=files", "data.path=ds", "data.workers=3"), tmp_path, 1)
    assert point.name == "001-pytorch-resnet50-fp32-1x1-bs8-files-w3"
    assert point.config.data.path == str(images)
    spec = spec_of(point, 0)  # a RunSpec, as the worker reads it from the file
    assert datafiles.settings(spec)["workers"] == 3


@pytest.mark.parametrize("overrides, message", [
    (["data=files"], "data=files needs data.path=DIR (python -m launch dataset DIR writes one)"),
    (["data=files", "data.path=/nonexistent/x"], "data.path '/nonexistent/x' is not a folder"),
    (["data=files", "data.path=EMPTY"], "data.path 'EMPTY' holds nothing for resnet50 "
                                        "(no train/<class>/*.JPEG)"),
    (["data=files", "data.path=DS", "model=bert_base"],
     "data.path 'DS' holds nothing for bert_base (no bert/pretrain-*.npz)"),
    (["data=files", "data.path=DS", "data.workers=-1"],
     "data.workers must be an integer >= 0 or null, got -1"),
    (["bench=input"], "bench=input measures an input pipeline: it needs data=files data.path=DIR"),
    (["data=files", "data.path=DS", "bench=comm"],
     "data=files applies to bench=train and bench=input, not bench=comm"),
])
def test_bad_data_settings(images, tmp_path, overrides, message):
    (tmp_path / "empty").mkdir()
    fill = {"EMPTY": str(tmp_path / "empty"), "DS": str(images)}
    overrides = [o.replace(k, v) for o in overrides for k, v in [next(
        ((k, v) for k, v in fill.items() if k in o), ("", ""))]]
    message = message.replace("EMPTY", fill["EMPTY"]).replace("DS", fill["DS"])
    with pytest.raises(points.ConfigError) as e:
        checks.validate(cfg_of(*overrides))
    assert str(e.value) == message


def test_an_empty_data_path_is_refused_in_one_line_before_anything_runs(tmp_path):
    (tmp_path / "empty").mkdir()
    p = subprocess.run([sys.executable, "-m", "launch", "data=files", f"data.path={tmp_path}/empty",
                        f"hydra.run.dir={tmp_path}/sweep"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr == (f"error: data.path '{tmp_path}/empty' holds nothing for resnet50 "
                        "(no train/<class>/*.JPEG)\n")
    assert not os.path.exists(tmp_path / "sweep" / "points")


def test_shards_are_disjoint_and_cover_the_files():
    shards = [datafiles.shard(10, r, 3) for r in range(3)]
    assert sorted(sum(shards, [])) == list(range(10)) and shards[0] == [0, 3, 6, 9]


def test_batches_wrap_around_each_epoch_reshuffled():
    ids = [1, 4, 7, 10, 13]
    it = datafiles.batches(ids, 2, seed=0)
    got = sum((next(it) for _ in range(5)), [])  # two epochs
    assert sorted(got[:5]) == ids and sorted(got[5:]) == ids and got[:5] != got[5:]
    with pytest.raises(datafiles.CorruptFile):
        next(datafiles.batches([], 2, 0))


def test_the_digest_of_disjoint_sets_combines_and_an_overlap_shows():
    a, b = datafiles.ids_digest([0, 2, 4]), datafiles.ids_digest([1, 3, 5])
    union = int(datafiles.ids_digest(range(6)), 16)
    assert int(a, 16) ^ int(b, 16) == union
    overlap = datafiles.ids_digest([1, 2, 3, 5])
    assert int(a, 16) ^ int(overlap, 16) != union


def test_crop_box_stays_inside_the_image():
    rng = random.Random(0)
    for w, h in [(300, 500), (500, 300), (64, 64), (1000, 10)]:
        for _ in range(50):
            left, top, right, bottom = datafiles.crop_box(w, h, rng)
            assert 0 <= left < right <= w and 0 <= top < bottom <= h


def test_a_framework_without_a_pipeline_answers_unsupported(images):
    data = {"source": "files", "path": str(images), "workers": 2}
    spec = run_spec(framework="jax", model={"name": "resnet50"}, config={"data": data})
    dist = distenv.DistEnv(0, 1, 0, 1, "127.0.0.1", 0)

    def build(spec, dist):  # of an adapter that names no data backends
        raise AssertionError("never built")
    record, session = harness.run(stand_in(build, "jax"), spec, dist, host="h")
    assert (record["status"], record["error"]) == ("unsupported",
                                                   "data=files not implemented for jax yet")
    assert record["data"] == {"source": "files", "path": str(images), "backend": "default",
                              "workers": 2}
    spec = run_spec(spec.as_dict(), config={"data": dict(data, backend="dali")})
    record, _ = harness.run(stand_in(build, "jax", data_backends=("torch",)), spec, dist, host="h")
    assert record["error"] == "data.backend=dali is not available for jax here (implemented: torch)"


def test_a_bench_a_framework_lacks_is_unsupported():
    with pytest.raises(harness.capability.Unsupported,
                       match="bench=nosuch is not implemented for pytorch yet"):
        registry.get("pytorch").bench("nosuch")


def test_the_framework_table_says_which_adapters_read_files():
    """FRAMEWORKS[name].files (the table docs/frameworks/README.md's cells rest on) is the backend each
    adapter's `data_backends` names first, and None exactly where it names none (the registry,
    read here in the suite's Python: it imports no framework)."""
    from tests.frameworks_env import FRAMEWORKS
    for name, fw in FRAMEWORKS.items():
        named = registry.get(name).data_backends[:1]
        assert named == ((fw.files,) if fw.files else ()), name
