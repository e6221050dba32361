"""`search=` on the real local Slurm cluster (launchers/backends/slurm/launcher.py): the largest batch that
trains under a memory cap, found inside ONE allocation, each try's repeat an srun step, OOM
as data; the same ledger and report section as on the local launcher
(tests/integration/test_special_models.py); a requeue in the middle of the search resumes it
without trying any value twice. No mock of any Slurm command."""
import glob
import json
import os
import subprocess
import sys
import time

import pytest

from launchers.suite import ROOT
from tests.integration.test_slurm_launcher import (SMOKE, jload, launch, release_requeued, slurm,
                                                   status, status_lines, wait_for)

pytestmark = pytest.mark.slurm
# ResNet-50 tiny under a 150 MiB cap: where it runs out of memory depends on the CPU (128 on one
# machine; 768-1024 on an AMD EPYC of 2026-11-28, oneDNN's refusal at 768 being an OOM too).
SEARCH = ("repeats=1", "warmup_steps=1", "measure_steps=2", "memory_limit_mb=150",
          "search={key:batch_size,start:32,max:4096,tolerance:0.5}")


@pytest.fixture(scope="module")
def searched(slurm_cluster, tmp_path_factory):
    sweep = tmp_path_factory.mktemp("search")
    res = launch(*SMOKE, *SEARCH, f"hydra.run.dir={sweep}")
    assert res.returncode == 0, res.stderr[-3000:]
    base = "000-pytorch-resnet50-fp32-1x1-bs4"
    job = jload(f"{sweep}/points/{base}/slurm.json")["job_id"]
    ledger_path = f"{sweep}/searches/{base}.json"
    # once the first try is in the ledger and the second has begun, requeue the allocation
    wait_for(lambda: len(jload(ledger_path)["tries"]) >= 1, timeout=240, what="the first try")
    wait_for(lambda: glob.glob(f"{sweep}/points/{base}-batch_size=64/repeat-00/step.json"),
             what="the second try to start")
    requeued_at = time.time()
    slurm("scontrol", "requeue", job)
    release_requeued(job)
    waited = status(sweep, "--wait", "--timeout", "300", "--interval", "1")
    return {"sweep": sweep, "base": base, "job": job, "submit": res.stdout, "status": waited,
            "ledger": jload(ledger_path), "requeued_at": requeued_at,
            "log": open(jload(f"{sweep}/points/{base}/slurm.json")["log"]).read()}


def test_search_finds_the_largest_batch_under_the_cap(searched):
    assert "search batch_size queued as Slurm job" in searched["submit"]
    ledger = searched["ledger"]
    assert ledger["done"] and ledger["stopped"] is None, ledger
    assert 32 <= ledger["largest_ok"] < ledger["smallest_oom"] <= 4096
    assert ledger["smallest_oom"] - ledger["largest_ok"] <= 0.5 * ledger["largest_ok"]
    outcomes = {t["value"]: t["outcome"] for t in ledger["tries"]}
    assert "oom" in outcomes.values() and outcomes[ledger["largest_ok"]] == "ok"
    for t in ledger["tries"]:  # each try a real run, a point of its own
        run = jload(f"{searched['sweep']}/points/{t['point']}/repeat-00/run.json")
        assert run["status"] == t["outcome"]


def test_every_try_ran_as_an_srun_step_of_the_one_job(searched):
    for t in searched["ledger"]["tries"]:
        step = jload(f"{searched['sweep']}/points/{t['point']}/repeat-00/step.json")
        assert step["job_id"] == searched["job"] and step["argv"][0] == "srun"
        rec = jload(f"{searched['sweep']}/points/{t['point']}/repeat-00/rank-00000.json")
        assert rec["environment"]["env"]["SLURM_JOB_ID"] == searched["job"]
    # the one job, requeued once, ends COMPLETED: OOM tries are data (the ledger is done
    # before the driver exits, so accounting may lag `status` by a moment)
    wait_for(lambda: slurm("sacct", "-X", "-n", "-P", "-o", "State", "-j", searched["job"]) == "COMPLETED",
             timeout=60, what="the job to complete")


def test_a_requeue_resumes_without_trying_a_value_twice(searched):
    ledger, sweep = searched["ledger"], searched["sweep"]
    values = [t["value"] for t in ledger["tries"]]
    assert len(values) == len(set(values)) and values[:2] == [32, 64]
    first = jload(f"{sweep}/points/{searched['base']}-batch_size=32/repeat-00/run.json")
    assert first["ended_unix"] < searched["requeued_at"]  # recorded before, not rerun
    assert "batch_size=32: ok (in the ledger; not tried again)" in searched["log"]
    # the try the requeue cut short was set aside whole and run again in the next allocation
    assert glob.glob(f"{sweep}/points/{searched['base']}-batch_size=64/repeat-00.interrupted-*")
    assert jload(f"{sweep}/points/{searched['base']}-batch_size=64/repeat-00/step.json")["restarts"] == 1


def test_status_shows_the_search_and_the_report_its_section(searched):
    res = searched["status"]
    assert res.returncode == 0, res.stdout + res.stderr  # OOM tries are data, not failures
    lines = status_lines(res.stdout)
    state, counts, job, detail = lines[searched["base"]]
    assert (state, job) == ("COMPLETED", searched["job"])
    assert detail.startswith(f"largest batch_size that trains: {searched['ledger']['largest_ok']}")
    out = subprocess.run([sys.executable, "-m", "analysis", "report", str(searched["sweep"]),
                          "--no-plot"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Largest size that trains" in out.stdout and "batch_size" in out.stdout
    assert json.dumps(searched["ledger"]["largest_ok"]) in out.stdout
    assert os.path.isdir(f"{searched['sweep']}/points/{searched['base']}")  # the job's record only
    assert not os.path.exists(f"{searched['sweep']}/points/{searched['base']}/point.json")
