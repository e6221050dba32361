"""The container image each point ran in, through the analysis (analysis/read/images.py): the
report's Environment section, `analysis history` and `analysis compare` say when two points
ran in different images. Sweeps built by hand, their records carrying `container` as the
harness writes it."""
import json
import os

import yaml

import analysis
from analysis.sections import environment
from analysis.store import history
from analysis.__main__ import main
from contract import paths, records
from tests.sweepfiles import write_point, write_repeat

POINT = "000-pytorch-resnet50-fp32-1x1-bs8"


def image(digest, name="/images/pt.sqfs"):
    return {"runtime": "charliecloud", "image": name, "digest": f"sha256:{digest * 64}",
            "digest_of": "the image file (sha256)", "why": None}


def sweep(root, name, created, container, window=1.0):
    """One point, one rank, one repeat of 80 / window samples/s, in `container` (or none)."""
    folder = os.path.join(root, name)
    point = write_point(folder, POINT, repeats=1)
    write_repeat(point, 0, [window], fields=lambda rank: {"container": container})
    path = os.path.join(point["dir"], paths.POINT_FILE)
    with open(path) as f:
        records.write_json_atomic(path, dict(json.load(f), created_unix=created))
    return folder


def test_the_environment_section_names_each_image_with_its_points(tmp_path):
    s = str(tmp_path / "s")
    write_repeat(write_point(s, POINT, repeats=1), 0, [1.0], fields=lambda r: {"container": image("a")})
    write_repeat(write_point(s, "001-pytorch-resnet50-fp32-1x1-bs16", batch_size=16, repeats=1), 0,
                 [1.0], fields=lambda r: {"container": image("b", "/images/other.sqfs")})
    text = environment.environment_block(analysis.load(s))
    assert "- images (the container each point's ranks ran in):" in text
    assert f"  charliecloud /images/pt.sqfs (sha256:{'a' * 12}): {POINT}" in text
    assert f"  charliecloud /images/other.sqfs (sha256:{'b' * 12}): 001-" in text


def test_no_image_lines_without_containers(tmp_path):
    s = sweep(tmp_path, "s", 1e9, None)
    assert "images" not in environment.environment_block(analysis.load(s))


def test_history_says_when_the_image_changed(tmp_path):
    sweep(tmp_path, "a", 1_000_000_000, image("a"))
    sweep(tmp_path, "b", 1_000_000_100, image("a"), window=0.5)
    sweep(tmp_path, "c", 1_000_000_200, image("c"), window=0.5)
    table = history.history(analysis.load(tmp_path, merge=True))
    assert list(table.other_image) == [None, False, True]
    text = history.render(table)
    assert f"charliecloud /images/pt.sqfs (sha256:{'c' * 12})" in text
    assert "+100.0% !" in text and "| +0.0%; other image |" in text


def test_compare_notes_a_point_measured_in_another_image(tmp_path, capsys):
    old = sweep(tmp_path, "old", 1e9, image("a"))
    ref = str(tmp_path / "ref.yaml")
    assert main(["reference", old, "--out", ref, "--system", "ci"]) == 0
    assert yaml.safe_load(open(ref))["entries"][0]["image"] == f"sha256:{'a' * 64}"
    capsys.readouterr()
    assert main(["compare", old, "--reference", ref]) == 0
    assert "not the same measurement" not in capsys.readouterr().out
    new = sweep(tmp_path, "new", 2e9, image("b"))
    assert main(["compare", new, "--reference", ref]) == 0  # a note, not a failure
    out = capsys.readouterr().out
    assert (f"note: entry 1 (pytorch resnet50/tiny fp32 bs8 1x1) was measured in image "
            f"sha256:{'a' * 64}; point {POINT} ran in charliecloud /images/pt.sqfs "
            f"(sha256:{'b' * 12}): not the same measurement") in out
    bare = sweep(tmp_path, "bare", 3e9, None)
    assert main(["compare", bare, "--reference", ref]) == 0
    assert f"point {POINT} ran in none: not the same measurement" in capsys.readouterr().out


def test_the_stored_history_says_so_after_the_folders_are_gone(tmp_path, capsys):
    """The store keeps each point's image (reference, digest, runtime): its history names the
    image and the change between images once the sweep folders are deleted."""
    import shutil
    db = str(tmp_path / "store.sqlite")
    for name, t, digest in (("a", 1_000_000_000, "a"), ("c", 1_000_000_200, "c")):
        folder = sweep(tmp_path, name, t, image(digest), window=1.0 if name == "a" else 0.5)
        assert main(["store", "add", folder, "--store", db]) == 0
        shutil.rmtree(folder)
    capsys.readouterr()
    assert main(["history", "--store", db]) == 0
    text = capsys.readouterr().out
    assert f"charliecloud /images/pt.sqfs (sha256:{'c' * 12})" in text
    assert "| +100.0% !; other image |" in text
