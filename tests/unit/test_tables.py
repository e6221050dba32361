"""analysis/tables.py's `percent`, the one rule every MFU is shown by: one decimal from 1% up,
two significant figures under it, never "0.0%" for a figure that is not zero (issue 51)."""
import math

import pytest

from analysis import tables


@pytest.mark.parametrize("value, text", [
    (0.117, "11.7%"), (0.408, "40.8%"), (1.0, "100.0%"), (0.01, "1.0%"),
    (0.0042, "0.42%"), (0.000123, "0.012%"), (0.00099, "0.099%"), (0.0000051, "0.00051%"),
    (0.00996, "1.0%"),        # 0.996% rounds to two figures as 1.0: from 1% up, one decimal
    (0.0, "0.0%")])
def test_percent_by_hand(value, text):
    assert tables.percent(value) == text


def test_no_figure_is_the_empty_text():
    assert tables.percent(None) == "n/a" and tables.percent(math.nan, "-") == "-"


def test_a_certifications_mfu_is_shown_by_the_same_rule():
    from analysis.sections import certification
    row = certification.row_of({"item": "llama", "nodes": 1, "gpus_per_node": 8, "metric": "mfu",
                                "unit": "fraction of peak", "measured": 0.0042, "baseline": 0.5999,
                                "ratio": 0.007, "threshold": 0.95, "verdict": "FAIL"}, [])
    assert row[3:5] == ["0.42%", "60.0%"]
