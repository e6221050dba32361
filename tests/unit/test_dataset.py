"""`python -m launch dataset OUT`: ImageNet's layout of decodable JPEGs and a BERT shard,
the same bytes from the same seed; bad arguments cost one line."""
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import launch
from frameworks.common import datafiles
from contract import paths

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def digest(folder) -> str:
    h = hashlib.sha256()
    for top, dirs, files in sorted(os.walk(folder)):
        dirs.sort()
        for f in sorted(files):
            if f != paths.DATASET_FILE:  # it records the seconds the build took
                h.update(f.encode())
                h.update(open(os.path.join(top, f), "rb").read())
    return h.hexdigest()


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = tmp_path_factory.mktemp("ds") / "data"
    assert launch.main(["dataset", str(out), "--images", "24", "--classes", "3",
                        "--sequences", "40", "--seed", "5"]) == 0
    return out


def test_layout_count_and_decodable_jpegs(made):
    images, labels, classes = datafiles.image_files(str(made))
    assert classes == ["n00000000", "n00000001", "n00000002"] and len(images) == 24
    assert sorted(set(labels)) == [0, 1, 2] and labels.count(0) == 8
    assert all(p.endswith(".JPEG") and os.path.dirname(os.path.dirname(p))
               == str(made / paths.IMAGES_DIR) for p in images)
    sizes = []
    for p in images:
        with Image.open(p) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
            im.load()
            sizes += list(im.size)
            # photo-like, not a flat colour: many distinct values, tens of KB
            assert len(np.unique(np.asarray(im)[..., 0])) > 100
        assert os.path.getsize(p) > 20_000
    assert 300 <= min(sizes) and max(sizes) <= 500
    manifest = json.loads((made / paths.DATASET_FILE).read_text())
    assert manifest["schema"] == paths.DATASET_SCHEMA and manifest["images"] == 24


def test_bert_shard_follows_the_synthetic_rules(made):
    cfg = {"seq_len": 128, "vocab_size": 1000, "max_predictions_per_seq": 20}
    a = datafiles.load_bert(str(made), cfg)
    assert a["input_ids"].shape == (40, 128) and a["masked_positions"].shape == (40, 20)
    assert a["input_ids"].max() < 1000 and set(np.unique(a["nsp_labels"])) <= {0, 1}
    real = a["masked_ids"] != datafiles.IGNORE
    assert (real.sum(axis=1) == 19).all()  # round(0.15 * 128), as synthetic.mlm_count
    assert (a["masked_positions"][real] >= 1).all() and (a["masked_positions"][~real] == 0).all()
    assert datafiles.available(str(made), "bert_base") == 40


def test_deterministic_from_the_seed(made, tmp_path):
    again, other = tmp_path / "again", tmp_path / "other"
    assert launch.main(["dataset", str(again), "--images", "24", "--classes", "3",
                        "--sequences", "40", "--seed", "5"]) == 0
    assert launch.main(["dataset", str(other), "--images", "24", "--classes", "3",
                        "--sequences", "40", "--seed", "6"]) == 0
    assert digest(made) == digest(again) != digest(other)


@pytest.mark.parametrize("args, says", [
    (["--images", "0"], "--images must be >= 1, got 0"),
    (["--images", "2", "--classes", "3"], "--classes 3 is more than --images 2"),
])
def test_bad_arguments_cost_one_line(tmp_path, args, says):
    p = subprocess.run([sys.executable, "-m", "launch", "dataset", str(tmp_path / "x"), *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.strip() == f"error: {says}", p.stderr
    assert not (tmp_path / "x").exists()


def test_a_folder_in_use_is_refused(made, capsys):
    assert launch.main(["dataset", str(made), "--images", "2", "--classes", "1"]) == 2
    assert capsys.readouterr().err.strip() == f"error: {made} exists and is not an empty folder"
