"""The GPU path of Llama 3 (frameworks/pytorch/titan/session.py: torchtitan's model, parallelize_llama,
pipeline_llm) built and run on this machine's CPU as far as the CPU goes (tests/titan_cpu_probe.py
says how): every layout builds, holds its share of the parameters and runs its forward; the
training step stops at FlexAttention's backward, which torch 2.13 has only on GPUs, and
nowhere before it. The GPU step itself is not run here: no GPU."""
import json

import pytest

from tests import rank_probes

pytest.importorskip("torchtitan.models.llama3", reason="torchtitan not installed: `make venv` installs "
                    "requirements-torchtitan.txt (pip install --no-deps)")
pytestmark = pytest.mark.e2e
FLEX_CPU = "FlexAttention does not support backward on CPU"
TINY_PARAMETERS = 226_624   # tests/unit/test_llama3.py: the CPU definition's and torchtitan's


LAYOUTS = [{}, {"fsdp": True}, {"tp": 2}, {"pp": 2}]   # the pipeline last: it leaves its group broken


@pytest.fixture(scope="module")
def probed():
    """settings -> (its two ranks' outputs, the ranks' last output): every layout in one pair
    of ranks (tests/rank_probes.py)."""
    ran = rank_probes.run("tests/titan_cpu_probe.py", [{"ranks": 2, "args": [s, 2]} for s in LAYOUTS])
    return {json.dumps(s): out for s, out in zip(LAYOUTS, ran)}


def probe(probed, settings):
    out, tail = probed[json.dumps(settings)]
    assert out, tail
    return out


@pytest.mark.parametrize("settings,held", [
    ({}, TINY_PARAMETERS),                         # replicated over dp 2
    ({"fsdp": True}, TINY_PARAMETERS // 2),        # FSDP2 shards every parameter over dp 2
    ({"tp": 2}, None),
])
def test_two_ranks_build_their_layout_and_stop_only_at_the_flex_backward(probed, settings, held):
    ranks = probe(probed, settings)
    assert len(ranks) == 2
    for r in ranks:
        assert r["step"] == "NotImplementedError: " + FLEX_CPU + \
            ". Please set the input requires_grad to False or use another device."
        assert r["record"]["layout"]["world"] == 2 and r["forward_loss"] > 0
        assert r["record"]["parameters"]["model"] == TINY_PARAMETERS
        assert r["record"]["implementation"] == "torchtitan 0.3.0 (parallelize_llama)"
        if held is not None:
            assert r["record"]["parameters"]["held"] == held
    if settings == {}:   # one seed on every rank (torchtitan's set_determinism): equal replicas
        assert ranks[0]["checksum"] == pytest.approx(ranks[1]["checksum"], rel=1e-12)
    if "tp" in settings:   # both tensor-parallel ranks hold half the matrices, see the whole loss
        assert ranks[0]["forward_loss"] == pytest.approx(ranks[1]["forward_loss"], rel=1e-6)
        assert ranks[0]["record"]["parameters"]["held"] < TINY_PARAMETERS
    assert sum(r["samples"] for r in ranks) == 2   # the global batch counted once


def test_a_pipeline_builds_its_stages_and_reaches_the_backward(probed):
    ranks = probe(probed, {"pp": 2})   # a rank whose peer stopped ends on gloo's closed pair
    assert any(FLEX_CPU in r["step"] for r in ranks), [r["step"] for r in ranks]
    assert all(r["record"]["implementation"].endswith("pipeline_llm)") for r in ranks)
    assert all(r["record"]["parameters"]["held"] < TINY_PARAMETERS for r in ranks)
