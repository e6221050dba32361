"""profile=true (frameworks/common/profile.py): extra steps after the first repeat's timed
window, traced on rank 0 only by the adapter's tracer, never in a window; a framework whose
adapter declares no tracer says so and runs no extra step; a profiler that fails costs only
the trace. The report links each trace (analysis/sections/traces.py). Real traces:
tests/integration/test_frameworks.py."""
import json
import os

import analysis
from analysis.report import contents as report
from frameworks import registry
from frameworks.common import harness, profile
from contract import paths
from frameworks.common.distenv import DistEnv
from tests.sweepfiles import write_point, write_repeat
from tests.runspecs import run_spec, stand_in
from tests.unit.test_harness import SPEC, Counting


def run(tmp_path, monkeypatch, rank=0, repeat=0, on=True, tracer=None):
    """A rank of the stand-in framework "none", whose adapter the registry holds while it
    runs (profile.py asks the registry, as a real rank's harness does)."""
    spec = run_spec(SPEC, repeat=repeat, framework="none", record_dir=str(tmp_path),
                    config={"profile": on})
    sessions = []

    def build(s, d):
        sessions.append(Counting(s, d))
        return sessions[-1]
    adapter = stand_in(build, tracer=tracer)
    monkeypatch.setattr(registry, "get", {"none": adapter}.__getitem__)
    rec = harness.run(None, spec, DistEnv(rank, 2, rank, 2, "h", 1))[0]
    return rec, sessions[0].calls


def test_off_or_a_later_repeat_runs_no_extra_step(tmp_path, monkeypatch):
    for kw in ({"on": False}, {"repeat": 1}):
        rec, calls = run(tmp_path, monkeypatch, **kw)
        assert rec["status"] == "ok" and "profile" not in rec and calls == 2 + 5


def test_a_framework_without_a_profiler_says_so_and_runs_no_extra_step(tmp_path, monkeypatch):
    rec, calls = run(tmp_path, monkeypatch)
    assert rec["status"] == "ok" and calls == 2 + 5
    assert rec["profile"]["status"] == "unsupported"
    assert rec["profile"]["error"] == ("no profiler hook for none in the suite yet (its adapter, "
                                       "frameworks/none/__init__.py, declares no tracer)")


def test_steps_after_the_window_traced_on_rank_0_only(tmp_path, monkeypatch):
    seen = []

    def tracer(folder, steps, session):
        seen.append(folder)
        steps(profile.STEPS)
        path = os.path.join(folder, "t.json")
        open(path, "w").write("{}")
        return {"tool": "t", "format": "f", "path": path, "traced_steps": profile.STEPS}
    rec, calls = run(tmp_path, monkeypatch, tracer=tracer)
    assert calls == 2 + 5 + profile.STEPS and rec["status"] == "ok"
    assert rec["profile"]["status"] == "ok" and seen == [paths.profile_dir(tmp_path, 0)]
    assert rec["profile"]["path"] == os.path.relpath(os.path.join(seen[0], "t.json"), tmp_path)
    # the timed window and the step list are the measured steps', the trace's are not in them
    assert len(rec["steps"]) == 2 + 5
    rec1, calls1 = run(tmp_path, monkeypatch, rank=1, tracer=tracer)
    assert calls1 == calls and rec1["profile"]["status"] == "untraced" and len(seen) == 1


def test_a_profiler_that_fails_costs_only_the_trace(tmp_path, monkeypatch):
    def tracer(folder, steps, session):
        steps(2)
        raise RuntimeError("profiler broke")
    rec, calls = run(tmp_path, monkeypatch, tracer=tracer)
    assert rec["status"] == "ok" and calls == 2 + 5 + profile.STEPS  # the ranks stay in step
    assert rec["profile"]["status"] == "failed" and "profiler broke" in rec["profile"]["error"]


def test_the_report_links_each_trace(tmp_path):
    s = str(tmp_path / "sweep")
    pt = write_point(s, "000-pytorch-bert_base-fp32-1x2-bs8", gpus_per_node=2, repeats=1)
    rdir = write_repeat(pt, 0, [1.0, 1.0])
    for rank, info in ((0, {"status": "ok", "tool": "torch.profiler", "format": "Chrome trace",
                            "path": "profile/rank-00000/trace.json", "traced_steps": 4}),
                       (1, {"status": "untraced", "steps": 5})):
        path = os.path.join(rdir, paths.rank_record_name(rank))
        rec = json.load(open(path))
        rec["profile"] = info
        json.dump(rec, open(path, "w"))
    parts = report.sections(analysis.load(s))
    text = report.text(parts)
    trace = os.path.join(rdir, "profile", "rank-00000", "trace.json")
    line = ("- 000-pytorch-bert_base-fp32-1x2-bs8 repeat 0, rank 0: torch.profiler, 4 steps after "
            f"the timed window; Chrome trace: [{os.path.relpath(trace, s)}]({trace})")
    assert line in text.splitlines() and "rank 1" not in text.split("## Traces")[1]
    from analysis.report import page as html_report
    page = html_report.page("t", parts)
    assert f'<a href="{trace}">{os.path.relpath(trace, s)}</a>' in page


def test_a_value_other_than_true_or_false_is_said_not_guessed(tmp_path, monkeypatch):
    rec, calls = run(tmp_path, monkeypatch, on="yes")
    assert rec["status"] == "ok" and calls == 2 + 5
    assert rec["profile"] == {"status": "failed",
                              "error": "profile must be true or false, got 'yes'"}


def test_a_cancel_while_tracing_ends_the_rank(tmp_path, monkeypatch):
    def tracer(folder, steps, session):
        raise harness.Cancelled("terminated by SIGTERM")
    rec, calls = run(tmp_path, monkeypatch, tracer=tracer)
    assert rec["status"] == "cancelled" and calls == 2 + 5
