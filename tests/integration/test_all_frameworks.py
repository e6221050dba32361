"""Issue 4's sweep: every framework of DLPerf's table through one `python -m launch`.

One row per framework in the report; a framework whose environment is missing or
that cannot train says so in its status and error, never hidden. Its points are the suite's
defaults (fp32, compile=auto), so its BERT points are also where each framework's auto is
checked to be its recommended mode (a sweep of that one point where this one was refused)."""
import subprocess
import sys

import pytest

import analysis
from frameworks import registry
from launchers.suite import ROOT
from launchers.plan.precheck import groups
from tests import frameworks_env
from tests.frameworks_env import FRAMEWORKS as TABLE, assert_trained, framework_ready, read_points
from tests.launching import launch

FRAMEWORKS = list(TABLE)  # the seven of tests/frameworks_env.py's table
pytestmark = [pytest.mark.e2e, pytest.mark.framework]


def test_every_framework_is_configured():
    assert set(FRAMEWORKS) <= set(groups()["framework"])


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """(the sweep's folder, None), or (None, why it was refused before any point ran: a
    framework's environment missing)."""
    out = tmp_path_factory.mktemp("frameworks")
    res = launch("-m", f"framework={','.join(FRAMEWORKS)}", "model=resnet50,bert_base", "preset=smoke",
                 "repeats=1", f"output_root={out}", f"hydra.sweep.dir={out}", timeout=1800)
    if res.returncode == 2 and "make env-" in res.stderr:
        return None, res.stderr.strip().splitlines()[-1]
    assert res.returncode in (0, 1), res.stderr[-3000:]
    return out, None


@pytest.fixture(scope="module")
def sweep(launched):
    out, refused = launched
    if refused:
        pytest.skip(refused)
    return out


def test_one_row_per_framework_and_model(sweep):
    points = analysis.load(sweep).points
    assert sorted(points.framework.unique()) == sorted(FRAMEWORKS)
    assert len(points) == 2 * len(FRAMEWORKS)
    report = subprocess.run([sys.executable, "-m", "analysis", "report", str(sweep), "--no-plot"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    for fw in FRAMEWORKS:
        assert f"| {fw} " in report.stdout


def test_each_framework_trains_or_says_why(sweep):
    points = analysis.load(sweep).points
    for row in points.itertuples():
        if row.status != "ok":
            # Honest endings only: what the device or the framework lacks, said in one line
            # (a missing environment refuses the sweep before any point runs: skipped above)
            assert row.error and row.status == "unsupported", row
        else:
            assert row.throughput > 0


RECOMMENDED = {"pytorch": "eager", "tensorflow": "tf.function", "jax": "jit", "paddle": "eager",
               "mxnet": "hybridize", "mindspore": "graph", "oneflow": "graph"}


@pytest.mark.parametrize("name", [name for name, fw in TABLE.items() if "auto" in fw.cases])
def test_auto_is_the_recommended_mode(name, launched, tmp_path):
    """The suite's defaults (compile=auto): BERT trains in the framework's recommended mode,
    the point is named by what auto resolved to, and its records say which mode that was."""
    out, refused = launched
    if refused:   # another framework's environment is missing: this one's point alone
        framework_ready(name)
        points = frameworks_env.sweep(tmp_path, name, "model=bert_base", "precision=fp32")
    else:
        points = {p: point for p, point in read_points(out).items()
                  if p.startswith(f"{name}-bert_base-")}
    (point_name, point), = points.items()
    if point.run["status"] != "ok":
        framework_ready(name)   # skips where the framework cannot be imported, as its table rows do
    compiled = RECOMMENDED[name] not in ("eager", "tf.function")
    assert point_name == f"{name}-bert_base-fp32-1x1-bs4" + ("-compile" if compiled else "")
    (rec,) = assert_trained(name, point)
    assert rec["mode"] == RECOMMENDED[name] == registry.get(name).modes.recommended
    assert rec["spec"]["compile_setting"] == "auto" and rec["spec"]["compile"] is compiled
