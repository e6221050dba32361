"""Every framework through the suite, as one table (tests/frameworks_env.py: FRAMEWORKS).

For each framework whose environment is built (`make env-<name>`; skips otherwise): its
models' parameter counts equal PyTorch's; the smoke sweep of both models in fp32 and AMP
(compile=false) trains, AMP where the capability check says it runs and `unsupported` with
its one line where it does not; compile=true trains; and two CPU ranks, each training
on its own batch (seed + rank), end with equal parameter checksums in their records (the
gradients were all-reduced) while their losses differ. Every trained record names its
`mode`; every BERT one says that its MLM head gathered 20 positions per sequence and that
its gradients were clipped at global norm 1.0 (`Framework.expected_env`), so BERT
pretraining as the references define it runs compiled and not, in every framework. What
is specific to one framework lives in test_framework_<name>.py; `-k <name>` selects one
framework's rows. The default, compile=auto, running the framework's recommended mode is
test_all_frameworks.py's (its sweep has that point of every framework).
"""
import os
import time

import pytest

from frameworks.common import harness
from frameworks.common.session import Session
from frameworks import registry
from frameworks.common.distenv import DistEnv
from tests.frameworks_env import (  # noqa: F401  (sweeps: a fixture)
    COUNT_CASES, FRAMEWORKS, MODELS, assert_amp, assert_trained, checksums, compile_sweep,
    fp32_amp_sweep, framework_ready, losses, parameter_counts, sweeps, two_ranks_sweep)
from tests.frameworks_env import DATASET, dataset, files_sweep  # noqa: F401  (dataset: a fixture)
from tests.runspecs import run_spec, stand_in
from frameworks.common import datafiles

framework = pytest.mark.framework  # every test but the first needs a framework's env


def rows(case):
    """The frameworks whose table row has this case, one test id each."""
    return [pytest.param(name, id=name) for name, fw in FRAMEWORKS.items() if case in fw.cases]


class Trained(Session):
    """A stand-in adapter whose parameter_checksum() does what it is given."""
    framework_version = "0"

    def __init__(self, checksum):
        self.checksum = checksum

    def step(self):
        return 1.0

    def parameter_checksum(self):
        return self.checksum()


def _hang():
    time.sleep(30)


def _fail():
    raise RuntimeError("weights gone")


@pytest.mark.parametrize("checksum,value,error", [
    (lambda: 12.5, 12.5, None),
    (lambda: "sum=1 sha1=ab", "sum=1 sha1=ab", None),
    (lambda: None, None, None),
    (_fail, None, "RuntimeError: weights gone"),
    (_hang, None, "TimeoutError: parameter_checksum() still running after 1 s"),
    (lambda: float("nan"), None, "ValueError: parameter_checksum() returned nan"),
    (lambda: [1], None, "TypeError: parameter_checksum() returned a list"),
], ids=["number", "string", "none", "raises", "hangs", "nan", "list"])
def test_the_checksum_is_recorded_and_its_failure_costs_only_that_field(monkeypatch, checksum,
                                                                         value, error):
    """The harness asks once the timed loop has ended ok, in a thread it waits on for at
    most CHECKSUM_TIMEOUT_S: the record stays `ok`, with null and the reason on failure."""
    monkeypatch.setattr(harness, "CHECKSUM_TIMEOUT_S", 1)
    spec = run_spec(batch_size=1, warmup_steps=1, measure_steps=2)
    rec = harness.run(stand_in(lambda s, d: Trained(checksum)), spec, DistEnv(0, 1, 0, 1, "h", 1))[0]
    assert rec["status"] == "ok" and rec["parameter_checksum"] == value
    assert rec.get("parameter_checksum_error") == error


@pytest.fixture
def fw(request):
    """The framework of a row (its interpreter ready, or the test skips)."""
    framework_ready(request.param)
    return FRAMEWORKS[request.param]


@framework
@pytest.mark.parametrize("model,size", COUNT_CASES, ids=[f"{m}-{s}" for m, s in COUNT_CASES])
@pytest.mark.parametrize("fw", rows("counts"), indirect=True)
def test_parameter_counts_match_the_reference(fw, model, size):
    ours, reference = parameter_counts(fw.name)[(model, size)], parameter_counts("pytorch")[(model, size)]
    assert abs(ours - reference) <= 0.005 * reference, (ours, reference)


@framework
@pytest.mark.parametrize("fw", rows("counts"), indirect=True)
def test_counting_through_the_shared_helper(fw):
    """The shared helper (parameter_counts: frameworks.<name>.models imported through the repo
    root, in the framework's env) counts the tiny ResNet exactly as PyTorch does. Its first
    case, so counted as in a process of its own; the session's one counting process per
    framework, not one more."""
    case = ("resnet50", "tiny")
    assert COUNT_CASES[0] == case
    assert parameter_counts(fw.name)[case] == parameter_counts("pytorch")[case]


@framework
@pytest.mark.e2e
@pytest.mark.parametrize("fw", rows("fp32"), indirect=True)
def test_fp32_sweep_trains(fw, sweeps):
    """Both models, fp32 and AMP, compile=false: its four points, fp32 ones trained."""
    points = fp32_amp_sweep(sweeps, fw.name)
    assert sorted(points) == sorted(f"{fw.name}-{m}-{p}-1x1-bs4" for m in MODELS for p in ("fp32", "amp"))
    for name, point in points.items():
        if "-fp32-" in name:
            assert_trained(fw.name, point)


@framework
@pytest.mark.e2e
@pytest.mark.parametrize("fw", rows("amp"), indirect=True)
def test_amp_trains_or_is_unsupported(fw, sweeps):
    """bf16 AMP (precision=amp's default dtype), compile=false: `ok` or `unsupported` as the
    table row and the capability check (tests.frameworks_env.amp_gap) say."""
    points = fp32_amp_sweep(sweeps, fw.name)
    amp = {name: point for name, point in points.items() if "-amp-" in name}
    assert len(amp) == len(MODELS)
    for point in amp.values():
        assert_amp(fw.name, point, fw.amp)


@framework
@pytest.mark.e2e
@pytest.mark.parametrize("fw", rows("compile"), indirect=True)
def test_compile_trains(fw, sweeps):
    """compile=true (XLA, jit, to_static, hybridize, GRAPH_MODE, nn.Graph) on both models,
    in the precisions of the row's compile case; AMP points as the capability check says."""
    points = compile_sweep(sweeps, fw.name)
    for name, point in points.items():
        assert name.endswith("-compile") and point.dir.split(os.sep)[-2].endswith("-compile")
        if "-amp-" in name:
            assert_amp(fw.name, point, fw.amp_compiled, fw.compile_amp_dtype, compile=True)
        else:
            assert_trained(fw.name, point)


@framework
@pytest.mark.e2e
@pytest.mark.parametrize("fw", rows("two_ranks"), indirect=True)
def test_two_ranks_agree(fw, sweeps):
    """Data parallel over 2 CPU processes: each rank trains on its own batch, so their
    losses differ, but the gradients are all-reduced, so their parameters end equal (the
    `parameter_checksum` of their records)."""
    points = two_ranks_sweep(sweeps, fw.name)
    for name, point in points.items():
        assert "-1x2-" in name
        r0, r1 = assert_trained(fw.name, point, world=2)
        if fw.compiled_loss_is_global and name.endswith("-compile"):
            assert losses(r0) == losses(r1)  # the loss of the global batch, on every rank
        else:
            assert r0["steps"][0]["loss"] != r1["steps"][0]["loss"]  # each rank's own batch
        s0, s1 = checksums(point.ranks)
        if fw.checksum_rel:
            assert s0 == pytest.approx(s1, rel=fw.checksum_rel), (s0, s1)
        else:
            assert s0 == s1, (s0, s1)


def read_trace(path: str) -> dict:
    """A trace file as JSON (gzip'd where its name says so)."""
    import gzip
    import json
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)


@framework
@pytest.mark.e2e
@pytest.mark.parametrize("fw", rows("two_ranks"), indirect=True)
def test_a_trace_on_demand(fw, sweeps):
    """profile=true (the two-rank sweep's): rank 0 of the first repeat traced extra steps
    after its timed window with the framework's own profiler, into its profile folder;
    rank 1 stepped along untraced; a framework with no hook says `unsupported`."""
    import glob
    for name, point in two_ranks_sweep(sweeps, fw.name).items():
        r0, r1 = (r["profile"] for r in point.ranks)
        traced = registry.get(fw.name).tracer is not None   # its adapter names a tracer
        if not traced:
            assert r0["status"] == r1["status"] == "unsupported", r0
            assert f"no profiler hook for {fw.name}" in r0["error"]
            continue
        assert r0["status"] == "ok" and r1["status"] == "untraced", (r0, r1)
        path = os.path.join(point.dir, r0["path"])
        assert path.startswith(os.path.join(point.dir, "profile", "rank-00000"))
        if fw.name == "tensorflow":   # a TensorBoard logdir: the profile plugin's XSpace
            assert glob.glob(os.path.join(path, "plugins", "profile", "*", "*.xplane.pb"))
        else:                         # Chrome trace JSON (torch), Perfetto JSON (jax)
            events = read_trace(path)["traceEvents"]
            assert len(events) > 100
            if fw.name == "pytorch":  # 4 steps traced: its profiler's first step warms it up
                assert sum(str(e.get("name", "")).startswith("ProfilerStep#") for e in events) == 4
        steps = [s for s in point.ranks[0]["steps"] if s["phase"] == "measure"]
        assert len(steps) == 5   # the traced steps are in no step list


@framework
@pytest.mark.e2e
@pytest.mark.parametrize("fw", rows("files"), indirect=True)
def test_trains_from_files(fw, sweeps, dataset):
    """data=files (docs/data.md): both models train from a dataset folder through the
    framework's own pipeline, and the pipeline alone (bench=input) times its batches; every
    record names the loader and its one worker, and the rank read every sample of its shard:
    the digest of the ids it read is the whole dataset's, the same in every framework."""
    points = files_sweep(sweeps, fw.name, dataset)
    for name, point in points.items():
        if name.startswith("input-"):
            run, [rec], _ = point
            assert run["status"] == rec["status"] == "ok", rec["error"]
            measured = [s for s in rec["steps"] if s["phase"] == "measure"]
            assert len(measured) == 5 and rec["window"]["end"] > rec["window"]["start"]
        else:
            [rec] = assert_trained(fw.name, point)
        assert (rec["data"]["source"], rec["data"]["backend"], rec["data"]["workers"]) == \
            ("files", fw.files, 1)
        n = DATASET["images"] if "-resnet50-" in name else DATASET["sequences"]
        assert rec["data"]["ids_digest"] == datafiles.ids_digest(range(n)), name
        assert rec["data"]["samples_read"] == 4 * (2 + 5)  # smoke: batch 4, 2 + 5 steps
