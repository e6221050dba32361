"""Real sweeps through `python -m launch` on this machine's CPU: real torch training."""
import glob
import json
import os
import re
import subprocess
import sys

import pytest

import analysis
from launchers.suite import ROOT
from tests import secret_search
# one thread a rank: a lone rank's 2 OpenMP threads on 2 shared cores spent most of its CPU
# time waiting for each other (its steps took about ten times a 2-rank point's here)
from tests.launching import launch

pytestmark = pytest.mark.e2e


OUTPUT = {}  # the shared sweep's launcher arguments and output (args, stdout, stderr)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """8 points; the site's secrets set as a team sets them (tests/secret_search.py: tokens in
    cluster.env, one under the site's own key, a password in store.url), and every rank run by
    an interpreter that checks it received them."""
    out = tmp_path_factory.mktemp("sweep")
    python = secret_search.rank_check(tmp_path_factory.mktemp("bin"), sys.executable)
    args = ("-m", "framework=pytorch", "model=resnet50,bert_base", "precision=fp32,amp",
            "gpus_per_node=1,2", "preset=smoke", f"hydra.sweep.dir={out}", f"framework.python={python}",
            *secret_search.overrides("postgresql+psycopg://bench:{password}@127.0.0.1:1/dlbench"))
    res = launch(*args)
    assert res.returncode == 0, res.stderr[-3000:]
    assert secret_search.found(texts=[res.stdout, res.stderr]) == []
    OUTPUT.update(args=args, stdout=res.stdout, stderr=res.stderr)
    return out


@pytest.fixture(scope="module")
def report(sweep, tmp_path_factory):
    """`python -m analysis report` of the shared sweep, plots and store included, run once: the
    secrets' test searches what it wrote, the report's test reads it."""
    store = tmp_path_factory.mktemp("report") / "results.sqlite"
    res = subprocess.run([sys.executable, "-m", "analysis", "report", str(sweep), "--store", str(store)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res, store


def test_the_launcher_shows_a_running_repeats_progress(sweep):
    """Not a terminal: rank 0's heartbeat as lines in the launcher's log (issue 52, item 4)."""
    seen = re.findall(r"^\d{3}-\S+ repeat (\d+)/(\d+), step (\d+)/(\d+) \((?:warmup|timed)\)",
                      OUTPUT["stdout"], re.M)
    assert seen, OUTPUT["stdout"][-2000:]
    # preset=smoke: 2 repeats of 2 warm-up and 5 timed steps
    assert all(1 <= int(r) <= 2 == int(n) and 0 <= int(s) <= 7 == int(t) for r, n, s, t in seen)


def test_every_rank_of_every_repeat_recorded(sweep):
    point_dirs = sorted(glob.glob(f"{sweep}/points/*"))
    assert len(point_dirs) == 8
    for pdir in point_dirs:
        point = json.load(open(f"{pdir}/point.json"))
        for r in range(point["repeats"]):
            run = json.load(open(f"{pdir}/repeat-{r:02d}/run.json"))
            assert run["status"] == "ok", run
            for rank in range(point["world_size"]):
                rec = json.load(open(f"{pdir}/repeat-{r:02d}/rank-{rank:05d}.json"))
                assert rec["status"] == "ok" and rec["world_size"] == point["world_size"]
                timed = [s for s in rec["steps"] if s["phase"] == "measure"]
                assert len(timed) == point["measure_steps"] == 5
                assert rec["framework"]["version"].startswith("2.13")
                assert rec["spec"]["config"]["model"]["size"] == "tiny"
                # compile=auto, the default: PyTorch's recommended mode is eager.
                assert rec["mode"] == point["mode"] == "eager" and point["compile"] is False
                assert rec["spec"]["compile_setting"] == point["compile_setting"] == "auto"
                # a CPU rank reads no energy counter: the null says why (contract/energy.py)
                assert rec["energy"]["energy_j"] is None and rec["energy"]["mean_power_w"] is None
                assert rec["energy"]["reason"] == "no NVML device: cpu"
                env = rec["environment"]
                if point["model"]["name"] == "bert_base":  # BERT as the references pretrain it
                    assert (env["max_predictions_per_seq"], env["clip_grad"], env["clip_norm"]) == \
                        (20, True, 1.0)
                else:
                    assert env["clip_grad"] is False


def test_no_secret_in_the_sweep_its_report_archive_or_store_and_the_ranks_had_them(sweep, report):
    """Every rank ran ok through the interpreter that exits 3 unless its environment holds each
    value; then no byte of the sweep (multirun.yaml, point.json, spec.json, records, logs), its
    report, its archive or its store holds one."""
    points = [json.load(open(p)) for p in glob.glob(f"{sweep}/points/*/point.json")]
    assert len(points) == 8
    assert all(p["framework"]["python"].endswith("rank-with-secrets") for p in points)
    runs = glob.glob(f"{sweep}/points/*/repeat-*/run.json")
    assert len(runs) == 16 and all(json.load(open(r))["status"] == "ok" for r in runs)
    assert points[0]["cluster"]["env"] == {k: "***" for k in secret_search.ENV}
    reported, store = report
    outs = [reported] + [subprocess.run([sys.executable, "-m", "analysis", *argv], cwd=ROOT, capture_output=True,
                                        text=True, timeout=300) for argv in
                         (["archive", str(sweep)], ["store", "list", "--store", str(store)])]
    assert [o.returncode for o in outs] == [0, 0, 0], [o.stderr for o in outs]
    assert "added " in outs[0].stdout and "secrets masked" not in outs[1].stdout
    status = launch("status", str(sweep), timeout=120)
    assert secret_search.found([sweep, f"{sweep}.tar.zst", store],
                               texts=[status.stdout] + [o.stdout + o.stderr for o in outs]) == []


def test_analysis_of_the_sweep(sweep):
    res = analysis.load(sweep)
    assert (res.points.status == "ok").all() and res.points.throughput.gt(0).all()
    assert set(res.points.precision) == {"fp32", "amp"} and set(res.points.devices) == {1, 2}
    one = res.points[res.points.devices == 1]
    assert (one.speedup == 1.0).all()
    assert res.steps.loss.notna().all()
    assert res.points.energy_per_sample_j.isna().all()
    assert (res.points.energy_reason == "no NVML device: cpu").all()


def test_report_cli(sweep, report):
    out, _ = report
    for text in ("## resnet50 (tiny)", "## bert_base (tiny)", "Speedup over 1 device",
                 "AMP over FP32", "| 1x1", "| 1x2"):
        assert text in out.stdout
    for plot in ("throughput", "scaling", "amp"):
        assert os.path.getsize(f"{sweep}/report/{plot}_resnet50.png") > 1000


def test_failing_rank_is_a_status_and_the_sweep_goes_on(tmp_path):
    # rank 1 of every point fails; the 1-rank point after it still runs and succeeds; the sweep
    # exits 1, in one line naming the point that did not pass (contract/exits.py)
    res = launch("-m", "gpus_per_node=2,1", "preset=smoke", "repeats=1",
                 f"hydra.sweep.dir={tmp_path}", env={"DLBENCH_FAIL_RANK": "1"})
    assert res.returncode == 1, res.stderr[-3000:]
    assert res.stderr.strip().splitlines()[-1] == (
        "sweep: 1 of 2 point(s) did not pass (000-pytorch-resnet50-fp32-1x2-bs4 FAILED): "
        f"python -m launch status {tmp_path}")
    pts = analysis.load(tmp_path).points.set_index("devices")
    assert pts.loc[2].status == "failed" and "injected failure on rank 1" in pts.loc[2].error
    assert pts.loc[1].status == "ok"


def test_timeout_is_a_status(tmp_path):
    # full-size BERT cannot finish 100 CPU steps in 5 s
    res = launch("model=bert_base", "repeats=1", "timeout_s=5", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 1, res.stderr[-3000:]
    assert "TIMEOUT" in res.stderr.strip().splitlines()[-1]
    run = analysis.load(tmp_path).runs.iloc[0]
    assert run.status == "timeout"


def test_rerun_into_the_same_sweep_counts_nothing_twice(sweep):
    """The shared sweep run again as it was (its tests above have read it): each of its 16
    repeats already recorded, none run or counted again."""
    second = launch(*OUTPUT["args"])
    assert second.returncode == 0 and second.stdout.count("already recorded") == 16, second.stderr[-3000:]
    assert len(analysis.load(sweep).runs) == 16


@pytest.mark.parametrize("args,message", [
    (["framework=nope"], "error: unknown framework 'nope' (valid: "),
    (["model=resnet50", "batch_size=0"], "error: batch_size must be an integer >= 1"),
    (["-m", "measure_steps=5,0"], "error: measure_steps must be an integer >= 1"),
    (["nodes=2"], "error: launcher=local runs on one node"),
    (["output_root=/proc/forbidden"], "error: output folder '/proc/forbidden' cannot be written"),
    (["compile=maybe"], "error: compile must be auto, true or false, got 'maybe'"),
])
def test_bad_input_one_line_nonzero(args, message, tmp_path):
    if not any(a.startswith("output_root=") for a in args):
        # Hydra makes its run folder before the launcher refuses `nodes=2`: not in the checkout.
        args = [*args, f"output_root={tmp_path}"]
    res = launch(*args, timeout=60)
    assert res.returncode != 0
    assert res.stderr.strip().startswith(message), res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_compile_switch_is_torch_compile(tmp_path):
    # the tiny Wide & Deep: inductor compiles its few kernels in half the tiny ResNet's CPU time
    res = launch("preset=smoke", "repeats=1", "compile=true", "model=wide_deep", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 0, res.stderr[-3000:]
    points = analysis.load(tmp_path).points
    assert points.iloc[0].status == "ok" and bool(points.iloc[0].compile)
    assert points.iloc[0].point.endswith("-compile")
    (path,) = glob.glob(f"{tmp_path}/points/*/repeat-00/rank-*.json")
    rec = json.load(open(path))
    assert rec["mode"] == "torch.compile" and rec["spec"]["compile_setting"] is True


def crashing_python(tmp_path, signal_name="SEGV"):
    """An 'interpreter' that says something and then kills itself with a signal."""
    script = tmp_path / "crashing-python"
    script.write_text("#!/bin/sh\necho 'loading the model'\necho 'about to crash' >&2\n"
                      f"kill -{signal_name} $$\n")
    script.chmod(0o755)
    return script


def test_a_crashed_rank_is_explained_by_its_signal_and_log(tmp_path):
    script = crashing_python(tmp_path)
    res = launch("preset=smoke", "repeats=1", "gpus_per_node=2", f"framework.python={script}",
                 f"hydra.run.dir={tmp_path / 'sweep'}")
    assert res.returncode == 1, res.stderr[-3000:]   # its point failed (docs/statuses.md)
    run = analysis.load(tmp_path / "sweep").runs.iloc[0]
    assert run.status == "failed"
    assert run.error == "rank 0 left no record: killed by SIGSEGV; no record from rank(s) 1"
    assert run.log_tail == {"rank": 0, "lines": ["loading the model", "about to crash"]}
    status = subprocess.run([sys.executable, "-m", "launch", "status", str(tmp_path / "sweep")],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "FAILED" in status.stdout and "killed by SIGSEGV" in status.stdout
    assert "    about to crash" in status.stdout
    report = subprocess.run([sys.executable, "-m", "analysis", "report", str(tmp_path / "sweep"),
                             "--no-plot"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "repeat 0: failed: rank 0 left no record: killed by SIGSEGV" in report.stdout
    assert "    about to crash" in report.stdout
