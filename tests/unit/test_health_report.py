"""The report's section on preflight (analysis/sections/health.py): which nodes each point's health
checks left out and why, where the point ran, or that it found too few healthy nodes."""
import os

import analysis
from analysis.report import contents as report
from contract import paths, records
from tests.sweepfiles import write_point, write_repeat


def preflight(point, **state):
    records.write_json_atomic(os.path.join(point["dir"], paths.PREFLIGHT_FILE),
                              {"schema": paths.PREFLIGHT_SCHEMA, "version": 1, **state})


def test_the_nodes_left_out_and_why_and_the_points_that_could_not_run(tmp_path):
    ran = write_point(tmp_path, "000-pytorch-resnet50-fp32-2x1-bs8", nodes=2, repeats=1)
    write_repeat(ran, 0, [1.0, 1.0])
    preflight(ran, outcome="ok", excluded={"node1": ["devices: 1 GPU(s), 2 requested"]},
              attempts=[{"nodes": ["node1", "node2"], "ok": False}, {"nodes": ["node2", "node3"], "ok": True}])
    gone = write_point(tmp_path, "001-pytorch-resnet50-fp32-3x1-bs8", nodes=3, repeats=1)
    preflight(gone, outcome="unhealthy", excluded={"node1": ["devices: 1 GPU(s), 2 requested"]},
              error="needs 3 healthy node(s); partition debug has 2 once node1 is left out", attempts=[])
    clean = write_point(tmp_path, "002-pytorch-resnet50-fp32-1x1-bs8", repeats=1)
    write_repeat(clean, 0, [1.0])
    preflight(clean, outcome="ok", excluded={}, attempts=[{"nodes": ["node1"], "ok": True}])
    res = analysis.load(str(tmp_path))
    text = report.render(res)
    # the unhealthy point is one in the tables too, with its reason, not a missing one
    p = res.points.set_index("point")
    assert p.loc["001-pytorch-resnet50-fp32-3x1-bs8", "status"] == "unhealthy"
    assert p.loc["001-pytorch-resnet50-fp32-3x1-bs8", "error"].startswith("needs 3 healthy node(s)")
    assert p.loc["000-pytorch-resnet50-fp32-2x1-bs8", "status"] == "ok"
    section = text.split("## Nodes left out by preflight")[1].split("\n## ")[0].strip().splitlines()
    assert section[1:] == [
        "- 000-pytorch-resnet50-fp32-2x1-bs8: ran on node2, node3; left out node1 (devices: 1 GPU(s), "
        "2 requested)",
        "- 001-pytorch-resnet50-fp32-3x1-bs8: unhealthy, no repeat ran: needs 3 healthy node(s); "
        "partition debug has 2 once node1 is left out"]


def test_no_section_without_preflight(tmp_path):
    p = write_point(tmp_path, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=1)
    write_repeat(p, 0, [1.0])
    assert "left out by preflight" not in report.render(analysis.load(str(tmp_path)))
