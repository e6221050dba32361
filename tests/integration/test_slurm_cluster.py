"""The local Slurm test cluster itself: nodes, hostnames, fake GPUs, job states."""
from __future__ import annotations

import subprocess
import time

import pytest

from tests.slurm_cluster import LocalSlurmCluster

pytestmark = pytest.mark.slurm


def sh(cluster, *argv: str, timeout: float = 60, check: bool = True) -> str:
    """Run a Slurm client against the cluster; every call has a time limit."""
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                       env=cluster.client_env())
    if check and r.returncode:
        raise AssertionError(f"{argv} exited {r.returncode}: {r.stderr}")
    return r.stdout.strip()


def wait_for(pred, timeout: float = 30, what: str = "condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def job_state(cluster, job_id: str) -> str:
    """The state as sacct (accounting) or else scontrol reports it."""
    if cluster.accounting:
        return sh(cluster, "sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State", check=False)
    out = sh(cluster, "scontrol", "-o", "show", "job", job_id, check=False)
    return next((f.split("=", 1)[1] for f in out.split() if f.startswith("JobState=")), "")


def running(cluster, job_id: str) -> bool:
    """From the controller: sacct learns that a job started seconds later."""
    return sh(cluster, "squeue", "-h", "-j", job_id, "-o", "%T", check=False) == "RUNNING"


def submit(cluster, script: str, *opts: str) -> str:
    return sh(cluster, "sbatch", "--parsable", "--time=1", "-o", "/dev/null", *opts,
              "--wrap", script).split(";")[0]


def test_all_nodes_idle(slurm_cluster):
    """Every node idle, once the jobs an earlier test cancelled have ended (KillWait=5)."""
    end = time.monotonic() + 20
    while True:
        out = sh(slurm_cluster, "sinfo", "-h", "-N", "-o", "%N %t %c %G")
        rows = [line.split() for line in out.splitlines()]
        if all(r[1] == "idle" for r in rows) or time.monotonic() > end:
            break
        time.sleep(1)
    assert sorted(r[0] for r in rows) == sorted(slurm_cluster.node_names)
    assert all(r[1] == "idle" for r in rows), out + sh(slurm_cluster, "squeue", "-h", check=False)
    assert len(rows) >= 3


def test_up_again_reuses_running_cluster(slurm_cluster):
    c = slurm_cluster
    same = LocalSlurmCluster(c.dir, c.nodes, c.gpus_per_node, accounting=c.accounting)
    assert same.is_up()
    assert same.up() is False  # nothing restarted


def test_one_task_per_node_has_its_own_hostname(slurm_cluster):
    n = slurm_cluster.nodes
    out = sh(slurm_cluster, "srun", f"-N{n}", f"-n{n}", "--time=1", "hostname")
    assert sorted(out.split()) == sorted(slurm_cluster.node_names)


def test_node_names_resolve_inside_nodes(slurm_cluster):
    last = slurm_cluster.node_names[-1]
    out = sh(slurm_cluster, "srun", "-N1", "-w", "node1", "--time=1", "getent", "hosts", last)
    assert out.split()[1] == last


def test_fake_gpus_set_cuda_visible_devices(slurm_cluster):
    k = slurm_cluster.gpus_per_node
    if k < 2:
        pytest.skip("needs 2 fake GPUs per node")
    out = sh(slurm_cluster, "srun", "-N1", "-n1", "--time=1", "--gpus-per-node=2",
             "printenv", "CUDA_VISIBLE_DEVICES")
    assert out == "0,1"


def test_exit_1_is_failed(slurm_cluster):
    job = submit(slurm_cluster, "exit 1")
    assert wait_for(lambda: job_state(slurm_cluster, job) == "FAILED", what="FAILED")


def test_exit_0_is_completed(slurm_cluster):
    job = submit(slurm_cluster, "true")
    assert wait_for(lambda: job_state(slurm_cluster, job) == "COMPLETED", what="COMPLETED")


def test_scancel_is_cancelled(slurm_cluster):
    job = submit(slurm_cluster, "sleep 300")
    wait_for(lambda: running(slurm_cluster, job), what="RUNNING")
    sh(slurm_cluster, "scancel", job)
    # sacct says "CANCELLED by 0"
    assert wait_for(lambda: job_state(slurm_cluster, job).startswith("CANCELLED"), what="CANCELLED")


def test_requeue_is_allowed(slurm_cluster):
    job = submit(slurm_cluster, "sleep 300")
    try:
        wait_for(lambda: running(slurm_cluster, job), what="RUNNING")
        sh(slurm_cluster, "scontrol", "requeue", job)
        out = wait_for(lambda: "Restarts=1" in (o := sh(slurm_cluster, "scontrol", "-o", "show",
                                                          "job", job)) and o, what="a restart")
        assert "Requeue=1" in out
    finally:
        sh(slurm_cluster, "scancel", job, check=False)


def test_submitit_reads_real_states(slurm_cluster, tmp_path):
    submitit = pytest.importorskip("submitit")
    if not slurm_cluster.accounting:
        pytest.skip("submitit reads job states from sacct, which needs slurmdbd")
    executor = submitit.AutoExecutor(folder=tmp_path / "%j")  # every node sees /tmp
    # submitit asks Slurm for USR2 90 s before the time limit (its requeue signal), which Slurm
    # may send up to 60 s earlier (sbatch --signal): with 2 minutes, at once (seen: both tasks
    # killed by USR2 in a 17 s test)
    executor.update_parameters(timeout_min=10, slurm_partition="debug", nodes=2, tasks_per_node=1)
    job = executor.submit(sum, [1, 2, 3])
    assert job.results() == [6, 6]
    # sacct learns of a job about a second after slurmctld; submitit caches states.
    assert wait_for(lambda: job.state == "COMPLETED" or None, what="submitit COMPLETED")
