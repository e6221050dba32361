"""The timed loop, with a pure-Python session standing in for a framework."""
import math
import os
import subprocess
import sys

import pytest

from frameworks.common import harness
from frameworks.common.session import HostTimer, Session
from frameworks.common.distenv import DistEnv
from launchers.suite import ROOT
from tests.runspecs import run_spec, stand_in

SPEC = {"point": "p", "repeat": 0, "framework": "none", "batch_size": 4,
        "warmup_steps": 2, "measure_steps": 5}


class Counting(Session):
    framework_version = "0"

    def __init__(self, spec, dist, losses=None, fail_at=None, exc=RuntimeError("boom")):
        self.calls, self.losses, self.fail_at, self.exc = 0, losses, fail_at, exc
        self.synced = []

    def step(self):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.exc
        return self.losses[self.calls - 1] if self.losses else 1.0 / self.calls

    def sync(self):
        self.synced.append(self.calls)


def run(**kw):
    return harness.run(stand_in(lambda s, d: Counting(s, d, **kw)), run_spec(SPEC),
                       DistEnv(0, 1, 0, 1, "h", 1))[0]


def test_ok_record_has_warmup_then_timed_steps():
    rec = run()
    assert rec["status"] == "ok" and rec["error"] is None
    phases = [s["phase"] for s in rec["steps"]]
    assert phases == ["warmup"] * 2 + ["measure"] * 5
    timed = [s for s in rec["steps"] if s["phase"] == "measure"]
    assert rec["window"]["start"] <= timed[0]["start"] and timed[-1]["end"] <= rec["window"]["end"]
    assert all(s["samples"] == 4 and s["loss"] is not None for s in rec["steps"])


def test_no_sync_inside_the_timed_window():
    sessions = []

    def build(s, d):
        sessions.append(Counting(s, d))
        return sessions[-1]
    harness.run(stand_in(build), run_spec(SPEC), DistEnv(0, 1, 0, 1, "h", 1))[0]
    # syncs after each warm-up step (1, 2), before the window (2), and at its end (7) only
    assert sessions[0].synced == [1, 2, 2, 7]


def test_the_window_s_energy_is_null_with_the_reason_where_nvml_cannot_read():
    rec = run()   # an adapter that names no GPU (the Session's default)
    assert rec["energy"]["energy_j"] is None and rec["energy"]["mean_power_w"] is None
    assert rec["energy"]["reason"] == "the adapter names no GPU to NVML (Counting.nvml_device)"

    class OnCpu(Counting):
        def nvml_device(self):
            self.asked = (self.calls, list(self.synced))
            return None
    sessions = []

    def build(s, d):
        sessions.append(OnCpu(s, d))
        return sessions[-1]
    rec = harness.run(stand_in(build), run_spec(SPEC), DistEnv(0, 1, 0, 1, "h", 1))[0]
    # asked once, after the warm-up and before the window's opening sync: never inside it
    assert sessions[0].asked == (2, [1, 2]) and sessions[0].synced == [1, 2, 2, 7]
    assert rec["energy"]["reason"] == "no NVML device: cpu"


def test_non_finite_loss_fails_the_run():
    rec = run(losses=[1.0, 1.0, 1.0, math.nan, 1.0, 1.0, 1.0])
    assert rec["status"] == "failed" and "non-finite loss nan at measure step 3" in rec["error"]


def test_oom_and_failure_are_told_apart():
    assert run(fail_at=4, exc=MemoryError("out of memory"))["status"] == "oom"
    rec = run(fail_at=4)
    assert rec["status"] == "failed" and rec["error"] == "RuntimeError: boom"


def test_injected_rank_failure(monkeypatch):
    monkeypatch.setenv("DLBENCH_FAIL_RANK", "0")
    rec = run()
    assert rec["status"] == "failed" and "injected failure on rank 0" in rec["error"]


def test_a_framework_that_cannot_import_still_leaves_a_record():
    spec = run_spec(SPEC, framework="no_such_framework")
    rec = harness.run(None, spec, DistEnv(0, 1, 0, 1, "h", 1))[0]
    assert rec["status"] == "failed" and "ModuleNotFoundError" in rec["error"]


def test_sigterm_becomes_cancelled():
    rec = run(fail_at=3, exc=harness.Cancelled("terminated by SIGTERM"))
    assert rec["status"] == "cancelled"


@pytest.mark.parametrize("key", ["peak_device_bytes", "peak_host_bytes"])
def test_memory_fields_present(key):
    assert key in run()["memory"]


class Allocating(Counting):
    """A device whose allocator's peak is the step count since its last reset, plus 100 for
    what was made before (the model's build): a peak that is the timed window's reads 5."""

    def __init__(self, spec, dist, resets=True, **kw):
        super().__init__(spec, dist, **kw)
        self.resets, self.since, self.reset_at = resets, 100, []

    def step(self):
        self.since += 1
        return super().step()

    def reset_peak_device_bytes(self):
        if self.resets:
            self.reset_at.append(self.calls)
            self.since = 0
        return self.resets

    def peak_device_bytes(self):
        return self.since

    def after_window(self, record):
        self.since += 50   # untimed steps after the window (a trace) are no part of its peak


def _peaks(**kw):
    sessions = []

    def build(s, d):
        sessions.append(Allocating(s, d, **kw))
        return sessions[-1]
    rec = harness.run(stand_in(build), run_spec(SPEC), DistEnv(0, 1, 0, 1, "h", 1))[0]
    return rec, sessions[0]


def test_the_device_peak_is_the_timed_windows():
    """peak_device_bytes is the peak of the timed steps: reset after the 2 warm-up steps, read
    after the 5 timed ones (not the process's: the build's 100, the warm-up's, the trace's)."""
    rec, session = _peaks()
    assert session.reset_at == [2]
    assert rec["memory"]["peak_device_bytes"] == 5 and rec["memory"]["peak_device_scope"] == "window"
    rec, _ = _peaks(fail_at=5)   # failed inside the window: its peak up to the failure
    assert rec["status"] == "failed" and rec["memory"]["peak_device_bytes"] == 3
    assert rec["memory"]["peak_device_scope"] == "window"
    rec, _ = _peaks(resets=False)   # a framework that cannot reset: the process's, and says so
    assert rec["memory"]["peak_device_bytes"] == 100 + 7 + 50
    assert rec["memory"]["peak_device_scope"] == "process"
    assert "peak_device_scope" not in run()["memory"]   # no device: no peak, no scope


def test_oom_while_a_torch_session_is_built_is_oom():
    """A real allocation refused inside TorchSession.__init__ (full-size BERT, 440 MB of
    weights, under a 64 MiB cap): the adapter's static OOM check decides, not `failed`."""
    from tests.frameworks_env import model_cfg
    spec = run_spec(SPEC, framework="pytorch", model=model_cfg("bert_base", "full"), precision="fp32",
                    amp_dtype=None, compile=False, device="cpu", seed=0, rendezvous_timeout_s=30,
                    memory_limit_mb=64)
    rec = harness.run(None, spec, DistEnv(0, 1, 0, 1, "h", 1))[0]  # the registry's pytorch
    assert rec["status"] == "oom", rec["error"]
    assert "can't allocate memory" in rec["error"] or "not enough memory" in rec["error"]


def test_the_record_names_the_image_its_spec_gives():
    image = {"runtime": "charliecloud", "image": "/i.sqfs", "digest": "sha256:ab", "digest_of": "f",
             "why": None}
    rec = harness.run(stand_in(lambda s, d: Counting(s, d)), run_spec(SPEC, container=image),
                      DistEnv(0, 1, 0, 1, "h", 1))[0]
    assert rec["container"] == image and rec["framework"]["version"] == "0"
    assert run()["container"] is None  # no image: the suite's own interpreters


class DeviceTimed(Counting):
    """A session whose timer stands in for a device's (its step ends are not the host's)."""

    def timer(self):
        timer = HostTimer()
        timer.device_ends = True
        return timer

    def step_syncs(self):
        return {"syncs": False, "sleep_s": 0.02, "host_s": 0.001}


def test_beside_a_devices_step_ends_the_host_s_end_of_enqueuing_each():
    rec = harness.run(stand_in(DeviceTimed), run_spec(SPEC), DistEnv(0, 1, 0, 1, "h", 1))[0]
    timed = [s for s in rec["steps"] if s["phase"] == "measure"]
    assert all(s["start"] <= s["enqueued"] <= s["end"] for s in timed)   # read before end()
    assert [s["enqueued"] for s in timed] == sorted(s["enqueued"] for s in timed)
    assert not any("enqueued" in s for s in rec["steps"] if s["phase"] == "warmup")
    assert rec["step_sync"] == {"syncs": False, "sleep_s": 0.02, "host_s": 0.001}
    plain = run()   # host-timed steps: their end is the host's already; no probe either
    assert not any("enqueued" in s for s in plain["steps"]) and "step_sync" not in plain


def test_a_primitive_onednn_could_not_create_is_oom_only_under_the_memory_cap():
    """oneDNN refused its buffers under memory_limit_mb says "could not create a primitive"
    (the Slurm search test at batch 768 on an AMD EPYC): PyTorch's OOM rule takes it for out of
    memory where the rank runs capped, and for a failure where it does not. In a process of its
    own: RLIMIT_AS is the process's."""
    code = ("import resource, sys; from frameworks.pytorch.session import TorchSession; "
            "from frameworks.common import memory; e = RuntimeError('could not create a primitive'); "
            "free = TorchSession.is_oom(e); limits = memory.limit_memory(4096); "
            "capped = TorchSession.is_oom(e); memory.restore(limits); "
            "print(free, capped, TorchSession.is_oom(e))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.stdout.split() == ["False", "True", "False"], out.stderr[-2000:]
