"""One rule for when a point's setting is a row's (analysis/figures/matching.py): the regression
gate (compare), the published throughputs (published) and the published layouts
(published_layouts) all give the same answer for the same pair of values. Before the rule
was one, 2048.0 (a DataFrame's) was not 2048 (a file's) in the throughput table but was in
the gate, and true was 1 in the layouts table but not in the gate."""
import numpy as np
import pytest

from analysis.gate import compare
from analysis.figures import matching
from analysis.published import sources as published
from analysis.published import layouts as published_layouts

PAIRS = [  # (the point's value, the row's, same?)
    ("AMP", "amp", True),              # text: case-insensitively
    ("amp", "fp32", False),
    (2048.0, 2048, True),              # numbers: as numbers
    (np.int64(2), 2.0, True),          # numpy scalars: as their Python values
    (2048, "2048", True),              # a number against text: as text
    (True, True, True),                # booleans: as booleans
    (np.bool_(False), False, True),
    (True, 1, False),                  # ... never as numbers
    (1, True, False),
    (False, 0, False),
    (True, "true", True),              # a boolean against text: as text
    (None, "none", False),             # not stated is nothing but not stated
]


@pytest.mark.parametrize("mine, theirs, same", PAIRS)
def test_the_rule(mine, theirs, same):
    assert matching.same(mine, theirs) is same
    assert matching.same(theirs, mine) is same


@pytest.mark.parametrize("mine, theirs, same", [p for p in PAIRS if p[0] is not None])
def test_every_table_matches_by_the_one_rule(mine, theirs, same):
    gate = compare.matches({"precision": mine}, {"precision": theirs})
    point = {"status": "ok", "throughput": 1.0, "model_size": "full", "framework": "pytorch",
             "model": "resnet50", "precision": mine, "devices": 1, "batch_size": 8,
             "compile": False, "device": "NVIDIA A100-SXM4-40GB"}
    row = {"device": "A100", "framework": "pytorch", "model": "resnet50", "precision": theirs,
           "devices": 1, "batch_size": None}
    throughput_table = published.matches(point, row)
    layouts_table = published_layouts.matches({"nodes": 1, "gpus_per_node": 1, "precision": mine},
                                              {"nodes": 1, "gpus_per_node": 1, "precision": theirs,
                                               "device": "A100"})
    assert (gate, throughput_table, layouts_table) == (same, same, same)
