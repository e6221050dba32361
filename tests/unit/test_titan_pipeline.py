"""The torchtitan path's pipeline step (frameworks/pytorch/titan/session.py: `microbatches`),
run on the CPU with torch's own schedules over a small model (tests/pipeline_probe.py), in the
suite's torch and in torch 2.11, the lent GPU machines': after one pipelined step every
parameter has the plain forward-backward's gradient and every micro-batch the plain loss over
the global batch's tokens. Before the fix the stages never ran backward (no gradient at all:
PipelineStage.has_backward was never set), and under torch 2.11 the step stopped on
`loss_kwargs` (a TypeError)."""
import json
import os
import subprocess
import sys

import pytest

from tests.frameworks_env import ROOT, require_torch_211


def probe(python, *schedules) -> dict:
    res = subprocess.run([python, "tests/pipeline_probe.py", *schedules], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    [line] = [x for x in res.stdout.splitlines() if x.startswith("PROBE ")] or [res.stderr[-3000:]]
    return json.loads(line[len("PROBE "):])


def check(out: dict, schedules) -> None:
    for name in schedules:
        assert out[name].get("all_gradients") is True, (out["torch"], name, out[name])
        assert out[name]["grad_diff"] < 1e-6 and out[name]["loss_diff"] < 1e-6, (out["torch"], name, out[name])


def test_every_stage_trains_in_the_suites_torch():
    schedules = ("gpipe", "1f1b", "interleaved_1f1b")
    check(probe(sys.executable, *schedules), schedules)


def test_every_stage_trains_and_the_loss_sees_the_global_tokens_in_torch_2_11():
    # interleaved: torch 2.11's gloo cannot send between two stages of one rank, so a single stage each
    schedules = ("gpipe", "1f1b")
    out = probe(require_torch_211(), *schedules)
    assert out["torch"].startswith("2.11")
    check(out, schedules)
