"""examples/analysis.ipynb runs, every cell, in a real Jupyter kernel (nbclient) against a
fresh smoke sweep, added to a results store of its own."""
import os
import subprocess
import sys

import pytest

from launchers.suite import ROOT

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytestmark = pytest.mark.e2e


def test_the_analysis_notebook_runs_on_a_fresh_sweep(tmp_path, monkeypatch):
    sweep = tmp_path / "sweep"
    res = subprocess.run([sys.executable, "-m", "launch", "-m", "preset=smoke", "repeats=1",
                          "gpus_per_node=1,2", f"hydra.sweep.dir={sweep}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    store = tmp_path / "results.sqlite"
    res = subprocess.run([sys.executable, "-m", "analysis", "store", "add", str(sweep), "--store",
                          str(store)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    nb = nbformat.read(ROOT / "examples" / "analysis.ipynb", as_version=4)
    monkeypatch.setenv("DLBENCH_SWEEP", str(sweep))  # the kernel inherits it
    monkeypatch.setenv("DLBENCH_STORE", str(store))
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # raises CellExecutionError on the first cell that fails
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "000-pytorch-resnet50-fp32-1x1-bs4" in text and "throughput" in text
    stored = str(nb.cells[-1].outputs[0]["data"]["text/plain"])   # analysis.stored()'s DataFrame
    assert "framework_version" in stored and "001-pytorch-resnet50-fp32-1x2-bs4" in stored
    assert os.path.getsize(sweep / "notebook_throughput.png") > 1000
