"""launcher=slurm on the real local Slurm cluster (3 nodes x 2 CPUs, 2 fake GPUs each):
real sbatch, srun, sacct and torch training. No mock of any Slurm command.

The cluster's nodes share this machine's 2 cores, so every sweep is small (tiny models,
one repeat where one is enough) and the long-running points are made long with many
timed steps, not big models.
"""
import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest

import analysis
from launchers.suite import ROOT
from tests import secret_search

pytestmark = pytest.mark.slurm
NODE = re.compile(r"node\d+")


def launch(*args, timeout=180):
    """`python -m launch ...` as a user runs it (os.environ points at the cluster)."""
    return subprocess.run([sys.executable, "-m", "launch", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def status(sweep, *args, timeout=660):
    return launch("status", str(sweep), *args, timeout=timeout)


def slurm(*argv, timeout=60):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout).stdout.strip()


def wait_for(pred, timeout=120, what="condition", step=0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def jload(path):
    with open(path) as f:
        return json.load(f)


def point_dirs(sweep):
    return sorted(glob.glob(f"{sweep}/points/*"))


def job_of(pdir) -> str:
    return jload(f"{pdir}/slurm.json")["job_id"]


def release_requeued(job: str) -> None:
    """Start a requeued job now instead of after Slurm's hold of about two minutes (BeginTime).

    Not at once: slurmd revokes the killed instance's credential, to the second, and
    refuses a new one created in that same second ("Job credential revoked"), which
    ends the job FAILED. Two seconds after the job is PENDING again is safe."""
    wait_for(lambda: slurm("squeue", "-h", "-j", job, "-o", "%T") == "PENDING", what="PENDING")
    time.sleep(2)
    slurm("scontrol", "update", f"JobId={job}", "StartTime=now")


def status_lines(text) -> dict:
    """point name -> (state, ok/rec/exp, job, detail) from the status table (the log tails
    of failed points follow it after a blank line)."""
    out = {}
    for line in text.split("\n\n")[0].splitlines()[1:]:
        name, state, counts, job, *detail = line.split(None, 4)
        out[name] = (state, counts, job, detail[0] if detail else "")
    return out


SMOKE = ("framework=pytorch", "launcher=slurm", "cluster=localtest", "preset=smoke")


# ---- (a) a scaling sweep: 1x1, 2x1, 3x1 and 2x2 -----------------------------------------------
@pytest.fixture(scope="module")
def scaling(slurm_cluster, tmp_path_factory):
    """4 points; the site's secrets set (tests/secret_search.py), every rank run by an
    interpreter that checks it received them through srun's environment."""
    sweep = tmp_path_factory.mktemp("scaling")
    python = secret_search.rank_check(tmp_path_factory.mktemp("bin"), sys.executable)
    secret = [f"framework.python={python}",
              *secret_search.overrides("postgresql+psycopg://bench:{password}@127.0.0.1:1/dlbench")]
    t0 = time.monotonic()
    first = launch("-m", *SMOKE, "nodes=1,2,3", "gpus_per_node=1", "repeats=1",
                   f"hydra.sweep.dir={sweep}", *secret)
    second = launch(*SMOKE, "nodes=2", "gpus_per_node=2", "repeats=1", f"hydra.run.dir={sweep}", *secret)
    submitted_s = time.monotonic() - t0
    assert first.returncode == 0, first.stderr[-3000:]
    assert second.returncode == 0, second.stderr[-3000:]
    waited = status(sweep, "--wait", "--timeout", "600", "--interval", "1")
    return {"sweep": sweep, "submit": first.stdout + second.stdout, "submitted_s": submitted_s,
            "status": waited}


def test_submission_queues_and_returns(scaling):
    assert scaling["submit"].count("queued as Slurm job") == 4
    assert f"sweep folder: {scaling['sweep']}" in scaling["submit"]
    assert scaling["submitted_s"] < 60  # two launches; nothing waited for a job
    for pdir in point_dirs(scaling["sweep"]):
        info = jload(f"{pdir}/slurm.json")
        assert info["job_id"].isdigit() and os.path.isdir(info["submitit_folder"])


def test_status_waits_until_every_point_completed(scaling):
    res = scaling["status"]
    assert res.returncode == 0, res.stdout + res.stderr
    lines = status_lines(res.stdout)
    assert len(lines) == 4
    for name, (state, counts, job, _) in lines.items():
        assert (state, counts) == ("COMPLETED", "1/1/1"), (name, state)
    assert "points final" in res.stderr  # the progress line
    assert slurm("sacct", "-X", "-n", "-P", "-o", "State", "-j",
                 ",".join(job_of(p) for p in point_dirs(scaling["sweep"]))).split() == ["COMPLETED"] * 4


def test_ranks_spread_over_nodes_with_gres_and_rendezvous_at_the_first(scaling):
    for pdir in point_dirs(scaling["sweep"]):
        point = jload(f"{pdir}/point.json")
        nodes, gpn = point["nodes"], point["gpus_per_node"]
        rdir = f"{pdir}/repeat-00"
        assert jload(f"{rdir}/run.json")["status"] == "ok"
        recs = [jload(f"{rdir}/rank-{r:05d}.json") for r in range(nodes * gpn)]
        hosts = [rec["host"] for rec in recs]
        assert all(NODE.fullmatch(h) for h in hosts), hosts
        assert len(set(hosts)) == nodes  # one host per node, gpus_per_node ranks on each
        for host in set(hosts):
            assert sorted(rec["local_rank"] for rec in recs if rec["host"] == host) == list(range(gpn))
        for rec in recs:
            env = rec["environment"]["env"]
            assert rec["status"] == "ok" and rec["world_size"] == nodes * gpn
            # the fake GPUs Slurm gave this job on the rank's node (another job may hold GPU 0)
            devices = env["CUDA_VISIBLE_DEVICES"].split(",")
            assert len(set(devices)) == gpn and set(devices) <= {"0", "1"}, devices
            assert env["SLURM_JOB_ID"] == job_of(pdir)
        step = jload(f"{rdir}/step.json")
        assert NODE.fullmatch(step["env"]["MASTER_ADDR"])
        assert step["env"]["MASTER_ADDR"] == recs[0]["host"]  # rank 0 runs on the first node
        assert 20000 <= int(step["env"]["MASTER_PORT"]) < 32000


def test_report_builds_the_speedup_table(scaling):
    out = subprocess.run([sys.executable, "-m", "analysis", "report", str(scaling["sweep"]),
                          "--no-plot"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Speedup over 1 device" in out.stdout
    for column in ("1x1", "2x1", "3x1", "2x2"):
        assert column in out.stdout
    points = analysis.load(scaling["sweep"]).points.set_index("devices")
    assert (points.status == "ok").all() and points.loc[1].speedup == 1.0
    assert points.throughput.gt(0).all()


def test_no_secret_in_the_jobs_files_accounting_report_archive_or_store(scaling, tmp_path):
    """The ranks ran ok through the interpreter that exits 3 unless srun gave them each value
    (from the driver's environment, which sbatch's exported); no byte of the sweep (its
    submitit folder: the sbatch scripts, the pickled drivers, their logs; step.json, srun.log,
    the records), of sacct's every field of its jobs, its report, archive or store holds one."""
    sweep = scaling["sweep"]
    assert all(jload(r)["status"] == "ok" for r in glob.glob(f"{sweep}/points/*/repeat-00/run.json"))
    assert glob.glob(f"{sweep}/slurm/*_submission.sh") and glob.glob(f"{sweep}/slurm/*_submitted.pkl")
    step = jload(glob.glob(f"{sweep}/points/*/repeat-00/step.json")[0])
    assert {k: step["env"][k] for k in secret_search.ENV} == {k: "***" for k in secret_search.ENV}
    jobs = ",".join(job_of(p) for p in point_dirs(sweep))
    accounting = slurm("sacct", "-j", jobs, "--format=ALL", "-P")   # its comment, its submit line
    store = tmp_path / "results.sqlite"
    outs = [subprocess.run([sys.executable, "-m", "analysis", *argv], cwd=ROOT, capture_output=True,
                           text=True, timeout=300)
            for argv in (["report", str(sweep), "--no-plot", "--store", str(store)],
                         ["archive", str(sweep)])]
    assert [o.returncode for o in outs] == [0, 0], [o.stderr for o in outs]
    assert secret_search.found([sweep, f"{sweep}.tar.zst", store],
                               texts=[accounting, scaling["submit"], scaling["status"].stdout,
                                      *(o.stdout + o.stderr for o in outs)]) == []


# ---- (b) a failing rank fails its point; its sibling completes ----------------------------------
def test_failing_rank_fails_its_point_and_the_sibling_completes(slurm_cluster, tmp_path):
    args = ("-m", *SMOKE, "nodes=2,1", "gpus_per_node=1", "repeats=1",
            "+cluster.env.DLBENCH_FAIL_RANK=1", "launcher.failure_grace_s=5", f"hydra.sweep.dir={tmp_path}")
    res = launch(*args)
    assert res.returncode == 0, res.stderr[-3000:]  # queued: the outcome is status --wait's
    waited = status(tmp_path, "--wait", "--timeout", "300", "--interval", "1")
    assert waited.returncode == 1, waited.stdout + waited.stderr  # not every point completed ok
    lines = status_lines(waited.stdout)
    failed = lines["000-pytorch-resnet50-fp32-2x1-bs4"]
    assert failed[:2] == ("FAILED", "0/1/1")
    assert "injected failure on rank 1" in failed[3]
    assert lines["001-pytorch-resnet50-fp32-1x1-bs4"][:2] == ("COMPLETED", "1/1/1")
    # Slurm's own view agrees: the driver exits non-zero when a repeat is not ok
    assert slurm("sacct", "-X", "-n", "-P", "-o", "State", "-j",
                 failed[2]) == "FAILED"
    # The same sweep again: nothing is queued (both points are recorded) and the sweep exits 1,
    # naming the point that did not pass (contract/exits.py)
    again = launch(*args)
    assert again.returncode == 1, again.stdout + again.stderr
    assert again.stderr.strip().splitlines()[-1] == (
        "sweep: 1 of 2 point(s) did not pass (000-pytorch-resnet50-fp32-2x1-bs4 FAILED): "
        f"python -m launch status {tmp_path}")
    assert job_of(point_dirs(tmp_path)[0]) == failed[2]   # no new job


# ---- (c) a point cancelled mid-run ------------------------------------------------------------
def test_cancelled_point_is_cancelled_and_its_repeat_not_counted(slurm_cluster, tmp_path):
    res = launch(*SMOKE, "nodes=1", "gpus_per_node=1", "repeats=2", "measure_steps=100000",
                 "timeout_s=600", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 0, res.stderr[-3000:]
    pdir = point_dirs(tmp_path)[0]
    job = job_of(pdir)
    # the first repeat's step is running: its spec, its srun step, a few seconds of training
    wait_for(lambda: os.path.exists(f"{pdir}/repeat-00/step.json"), what="repeat 0 to start")
    wait_for(lambda: f"{job}.0" in slurm("squeue", "-h", "-s", "-j", job, "-o", "%i"),
             what="the srun step")
    time.sleep(5)
    slurm("scancel", job)
    waited = status(tmp_path, "--wait", "--timeout", "120", "--interval", "1")
    assert waited.returncode == 1
    state, counts, _, detail = status_lines(waited.stdout)[os.path.basename(pdir)]
    assert (state, counts) == ("CANCELLED", "0/0/2"), waited.stdout
    # The cut-short repeat left no run.json: it is set aside whole, never read, and reruns
    # if the sweep is resubmitted.
    assert not glob.glob(f"{pdir}/repeat-*/run.json")
    aside = glob.glob(f"{pdir}/repeat-00.interrupted-*")
    assert len(aside) == 1 and not os.path.exists(f"{pdir}/repeat-00")
    ranks = glob.glob(f"{aside[0]}/rank-*.json")
    assert ranks and all(jload(r)["status"] == "cancelled" for r in ranks)  # SIGTERM reached the rank
    results = analysis.load(tmp_path)
    assert results.runs.empty and results.points.iloc[0].status == "missing"
    assert pd_isna(results.points.iloc[0].throughput)


def pd_isna(x) -> bool:
    return x is None or x != x


# ---- (d) a requeued job resumes, counting nothing twice -----------------------------------------
def test_requeued_job_resumes_without_counting_twice(slurm_cluster, tmp_path):
    res = launch(*SMOKE, "nodes=1", "gpus_per_node=1", "repeats=2", "measure_steps=500",
                 "timeout_s=600", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 0, res.stderr[-3000:]
    pdir = point_dirs(tmp_path)[0]
    job = job_of(pdir)
    # repeat 0 recorded, repeat 1 running
    wait_for(lambda: os.path.exists(f"{pdir}/repeat-00/run.json"), timeout=240, what="repeat 0")
    wait_for(lambda: os.path.exists(f"{pdir}/repeat-01/step.json"), what="repeat 1 to start")
    time.sleep(2)
    assert not os.path.exists(f"{pdir}/repeat-01/run.json"), "repeat 1 ended too soon for this test"
    requeued_at = time.time()
    slurm("scontrol", "requeue", job)
    release_requeued(job)
    waited = status(tmp_path, "--wait", "--timeout", "300", "--interval", "1")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert status_lines(waited.stdout)[os.path.basename(pdir)][:3] == ("COMPLETED", "2/2/2", job)

    runs = [jload(f"{pdir}/repeat-{r:02d}/run.json") for r in range(2)]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert runs[0]["ended_unix"] < requeued_at       # recorded before the requeue, not rerun
    assert runs[1]["started_unix"] > requeued_at     # rerun in the requeued allocation
    assert jload(f"{pdir}/repeat-01/step.json")["restarts"] == 1
    aside = glob.glob(f"{pdir}/repeat-*.interrupted-*")
    assert [os.path.basename(a).split(".")[0] for a in aside] == ["repeat-01"]
    assert not glob.glob(f"{aside[0]}/run.json")
    results = analysis.load(tmp_path)
    assert sorted(results.runs.repeat) == [0, 1] and (results.runs.status == "ok").all()
    assert results.points.iloc[0].n_ok == 2
    log = open(jload(f"{pdir}/slurm.json")["log"]).read()
    assert "repeat 0: already recorded (ok)" in log
    assert "REQUEUED" in slurm("sacct", "-X", "-D", "-n", "-P", "-o", "State", "-j", job)


# ---- (e) the signal before the time limit: the driver checkpoints and requeues itself ------------
def test_time_limit_signal_requeues_through_the_checkpoint(slurm_cluster, tmp_path):
    res = launch(*SMOKE, "nodes=1", "gpus_per_node=1", "repeats=1", "measure_steps=300",
                 "timeout_s=600", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 0, res.stderr[-3000:]
    pdir = point_dirs(tmp_path)[0]
    job = job_of(pdir)
    wait_for(lambda: os.path.exists(f"{pdir}/repeat-00/step.json"), what="repeat 0 to start")
    time.sleep(2)
    # What `#SBATCH --signal=B:USR2@120` delivers before the time limit: USR2 to the batch
    # shell, which is the driver. submitit calls its checkpoint() and requeues the job.
    slurm("scancel", "--batch", "--signal=USR2", job)
    release_requeued(job)
    waited = status(tmp_path, "--wait", "--timeout", "300", "--interval", "1")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert jload(f"{pdir}/repeat-00/run.json")["status"] == "ok"
    assert jload(f"{pdir}/repeat-00/step.json")["restarts"] == 1
    assert len(glob.glob(f"{pdir}/repeat-00.interrupted-*")) == 1
    log = open(jload(f"{pdir}/slurm.json")["log"]).read()
    assert "Calling checkpoint method" in log and "Requeued job" in log


# ---- (f) a repeat past its timeout_s is a timeout; the allocation goes on -----------------------
def test_repeat_past_its_timeout_is_timeout(slurm_cluster, tmp_path):
    res = launch(*SMOKE, "nodes=1", "gpus_per_node=1", "repeats=1", "measure_steps=100000",
                 "timeout_s=8", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 0, res.stderr[-3000:]
    waited = status(tmp_path, "--wait", "--timeout", "180", "--interval", "1")
    assert waited.returncode == 1
    pdir = point_dirs(tmp_path)[0]
    state, counts, _, detail = status_lines(waited.stdout)[os.path.basename(pdir)]
    assert (state, counts) == ("TIMEOUT", "0/1/1") and "repeat ended by timeout" in detail
    run = jload(f"{pdir}/repeat-00/run.json")
    assert run["status"] == "timeout" and run["ended_unix"] - run["started_unix"] < 60
    # the driver cancelled the step, so the rank got SIGTERM and still wrote its record
    assert jload(f"{pdir}/repeat-00/rank-00000.json")["status"] == "cancelled"
