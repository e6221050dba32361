"""A sweep written before the restructuring (2026-11-25, the demo's tiny ResNet-50 and BERT,
1 and 2 ranks) still loads and reports the same: its point.json and spec.json files read as
the typed Point and RunSpec, and the report's tables and text are the golden ones, which the
suite of that day wrote from these very files."""
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from contract import spec as specs
from contract.point import Point

HERE = Path(__file__).parent
DATA = HERE / "data" / "sweep-2026-11-25"
GOLDEN = HERE / "golden" / "sweep-2026-11-25"
ROOT = HERE.parent.parent


def test_its_points_and_specs_read_typed_and_write_back_their_keys():
    def within(old, new):  # every key the old file had, with its value (new files may hold more)
        if isinstance(old, dict):
            return all(k in new and within(v, new[k]) for k, v in old.items())
        return old == new
    files = sorted(glob.glob(str(DATA / "points" / "*" / "point.json")))
    assert len(files) == 4
    for path in files:
        old = json.loads(Path(path).read_text())
        point = Point.from_dict(old)
        assert point.name == os.path.basename(os.path.dirname(path))
        assert point.world_size == point.nodes * point.gpus_per_node
        assert within(old, point.as_dict()) and Point.from_dict(point.as_dict()) == point
    for path in glob.glob(str(DATA / "points" / "*" / "repeat-*" / "spec.json")):
        spec = specs.read(path)
        assert spec.model.name in ("resnet50", "bert_base") and spec.batch_size == 4
        assert within(json.loads(Path(path).read_text()), spec.as_dict())


def test_it_reports_the_same_as_before(tmp_path):
    sweep = tmp_path / "sweep-2026-11-25"
    shutil.copytree(DATA, sweep)
    out = subprocess.run([sys.executable, "-m", "analysis", "report", str(sweep), "--no-plot",
                          "--store", "off"],   # the report as that day printed it: no store then
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    for name in ("points.csv", "runs.csv"):
        got = (sweep / "report" / name).read_text().replace(str(sweep), "SWEEP")
        assert got == (GOLDEN / name).read_text(), name
    assert out.stdout.replace(str(sweep), "SWEEP") == (GOLDEN / "report.txt").read_text()
