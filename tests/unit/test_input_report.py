"""The report's input-bound rule (analysis/sections/input_pipeline.py), on hand figures: training
from files within 10% of the pipeline alone and at most 90% of synthetic."""
from collections import namedtuple

import pytest

from analysis.sections import input_pipeline

Row = namedtuple("Row", "status per_device")


@pytest.mark.parametrize("files, synthetic, alone, says", [
    (95.0, 200.0, 100.0, "input-bound (48% of synthetic)"),       # the pipeline sets the pace
    (89.0, 200.0, 100.0, "not input-bound (44% of synthetic)"),   # 11% below the pipeline
    (95.0, 100.0, 100.0, "not input-bound (95% of synthetic)"),   # as fast as synthetic
    (90.0, 100.0, 100.0, "input-bound (90% of synthetic)"),       # both edges count
])
def test_verdict(files, synthetic, alone, says):
    assert input_pipeline.verdict(Row("ok", files), Row("ok", synthetic), Row("ok", alone)) == says


def test_verdict_names_what_is_missing():
    assert input_pipeline.verdict(Row("ok", 1.0), None, Row("failed", 3.0)) == \
        "n/a: needs synthetic and pipeline alone"
