"""examples/analysis.ipynb runs, every cell, in a real Jupyter kernel (nbclient) against a
fresh smoke sweep, added to a results store of its own: from its own folder, as `jupyter
execute examples/analysis.ipynb` and Jupyter Lab start its kernel, finding make demo's newest
sweep in ../outputs/ (issue 52: an IndexError there), and its first cell from the repository
root; with no demo sweep, the first cell says what to run in one line."""
import os
import subprocess
import sys

import pytest

from launchers.suite import ROOT

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytestmark = pytest.mark.e2e


def test_the_analysis_notebook_runs_on_a_fresh_sweep(tmp_path, monkeypatch):
    # a checkout's outputs/ and examples/: the sweep is its newest demo, found by the notebook
    checkout = tmp_path / "checkout"
    sweep = checkout / "outputs" / "demo-20991231-235959"
    (checkout / "outputs" / "demo-20260101-000000").mkdir(parents=True)   # an older, empty one
    (checkout / "examples").mkdir()
    res = subprocess.run([sys.executable, "-m", "launch", "-m", "preset=smoke", "repeats=1",
                          "gpus_per_node=1,2", f"hydra.sweep.dir={sweep}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    store = tmp_path / "results.sqlite"
    res = subprocess.run([sys.executable, "-m", "analysis", "store", "add", str(sweep), "--store",
                          str(store)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    nb = nbformat.read(ROOT / "examples" / "analysis.ipynb", as_version=4)
    first = nb.cells[1]
    # the same kernel then runs the first cell again from the checkout's root, and from a
    # folder with no demo sweep (a cell of its own each, so that each says its own)
    extra = [nbformat.v4.new_code_cell(f"os.chdir({str(checkout)!r})"),
             nbformat.v4.new_code_cell(first.source + "\nSWEEP"),
             nbformat.v4.new_code_cell(f"os.chdir({str(tmp_path)!r})"),
             nbformat.v4.new_code_cell(first.source)]
    nb.cells += extra
    monkeypatch.delenv("DLBENCH_SWEEP", raising=False)   # the kernel inherits the environment
    monkeypatch.setenv("DLBENCH_STORE", str(store))
    # this checkout's analysis, wherever the kernel starts (the venv's may be another's)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                                     resources={"metadata": {"path": str(checkout / "examples")}})
    client.execute()
    cells = [c for c in nb.cells if c.cell_type == "code"]
    errors = [(i, o) for i, c in enumerate(cells) for o in c.outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0][0] == len(cells) - 1, errors
    assert errors[0][1].traceback == ["RecordError: no demo sweep in outputs/: run `make demo` "
                                      "first, or set DLBENCH_SWEEP to a sweep folder"]
    outputs = [o for c in cells[:-len(extra)] for o in c.outputs]
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "000-pytorch-resnet50-fp32-1x1-bs4" in text and "throughput" in text
    stored = str(cells[-len(extra) - 1].outputs[0]["data"]["text/plain"])   # analysis.stored()'s DataFrame
    assert "framework_version" in stored and "001-pytorch-resnet50-fp32-1x2-bs4" in stored
    assert os.path.getsize(sweep / "notebook_throughput.png") > 1000
    # from the checkout's root: the same sweep, as outputs/...
    assert cells[-3].outputs[-1]["data"]["text/plain"] == repr(os.path.join("outputs", sweep.name))
