"""Sweeps at cluster scale on the real local Slurm cluster: a 100-point sweep queued as one
job array (held: nothing runs) with every point its own array task and job id, then
cancelled; a small array that runs; launcher=auto choosing Slurm; a sweep with one
impossible point refused whole. The timing is a benchmark (benchmarks/submit_scale.py),
not asserted here."""
import os

import pytest

from tests.integration.test_slurm_launcher import (SMOKE, jload, launch, point_dirs, slurm,
                                                   status, status_lines)

pytestmark = pytest.mark.slurm
HOLD = "+cluster.sbatch_args={hold:true}"


def job_ids(sweep) -> dict:
    return {os.path.basename(p): jload(f"{p}/slurm.json")["job_id"] for p in point_dirs(sweep)}


def test_100_points_are_one_held_job_array_each_point_its_own_task(slurm_cluster, tmp_path):
    sweep = tmp_path / "sweep"
    res = launch("-m", *SMOKE, "seed=range(100)", HOLD, f"hydra.sweep.dir={sweep}")
    jobs = job_ids(sweep)
    try:
        assert res.returncode == 0, res.stderr[-3000:]
        assert len(jobs) == 100 and res.stdout.count("queued as Slurm job") == 100
        arrays = {job.split("_")[0] for job in jobs.values()}
        assert len(arrays) == 1, arrays  # one allocation shape: one sbatch
        (array,) = arrays
        assert sorted(int(job.split("_")[1]) for job in jobs.values()) == list(range(100))
        for name, job in jobs.items():
            info = jload(f"{sweep}/points/{name}/slurm.json")
            assert info["log"] == f"{sweep}/slurm/{job}_0_log.out"
            assert jload(f"{sweep}/points/{name}/point.json")["point"] == name
        # every task queued, held, under the id its point recorded
        queued = dict(line.split(None, 1) for line in
                      slurm("squeue", "-h", "-r", "-j", array, "-o", "%i %T|%r").splitlines())
        assert sorted(queued) == sorted(jobs.values())
        assert set(queued.values()) == {"PENDING|JobHeldUser"}
        # the same sweep submitted again: each point's job is still queued, nothing is added
        again = launch("-m", *SMOKE, "seed=range(100)", HOLD, f"hydra.sweep.dir={sweep}")
        assert again.returncode == 0 and again.stdout.count("already queued as Slurm job") == 100
        assert job_ids(sweep) == jobs
        assert len(slurm("squeue", "-h", "-r", "-j", array, "-o", "%i").split()) == 100
        cancel = launch("cancel", str(sweep))
        assert cancel.returncode == 0, cancel.stderr
        assert slurm("squeue", "-h", "-r", "-t", "PD,R", "-j", array, "-o", "%i") == ""
    finally:
        if jobs:
            slurm("scancel", *sorted(jobs.values()))


def test_an_array_runs_each_point_with_its_own_driver(slurm_cluster, tmp_path):
    sweep = tmp_path / "sweep"
    res = launch("-m", *SMOKE, "seed=0,1", "repeats=1", f"hydra.sweep.dir={sweep}")
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = job_ids(sweep)
    assert sorted(job.split("_")[1] for job in jobs.values()) == ["0", "1"]
    waited = status(sweep, "--wait", "--timeout", "300", "--interval", "1")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    lines = status_lines(waited.stdout)
    assert {name: v[:3] for name, v in lines.items()} == \
        {name: ("COMPLETED", "1/1/1", job) for name, job in jobs.items()}
    for name, job in jobs.items():
        pdir = f"{sweep}/points/{name}"
        assert jload(f"{pdir}/repeat-00/run.json")["status"] == "ok"
        step = jload(f"{pdir}/repeat-00/step.json")  # the driver ran as the array task and
        assert step["job_id"] == job  # names itself A_T: task 0's SLURM_JOB_ID is the array's
        assert f"job {job} " in open(jload(f"{pdir}/slurm.json")["log"]).read()
    # each task its own job id, so its own steps to stop, its own requeue
    assert len({jload(f"{sweep}/points/{n}/repeat-00/step.json")["job_id"] for n in jobs}) == 2


def test_auto_chooses_slurm_where_the_controller_answers(slurm_cluster, tmp_path):
    res = launch("preset=smoke", "cluster=localtest", "dry_run=true", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 0, res.stderr
    first, rest = res.stdout.split("\n", 1)
    assert first.startswith("launcher=auto: slurm (sbatch on PATH, `scontrol ping`: Slurmctld")
    assert "#SBATCH --partition=debug" in rest and not (tmp_path / "points").exists()


def test_a_sweep_with_an_impossible_point_queues_nothing(slurm_cluster, tmp_path):
    res = launch("-m", *SMOKE, "gpus_per_node=1,3", HOLD, f"hydra.sweep.dir={tmp_path}")
    assert res.returncode == 2
    assert res.stderr.startswith("error: gpus_per_node=3 is more than cluster localtest has per "
                                 "node (2) (sweep point 1: ")
    assert len(res.stderr.strip().splitlines()) == 1 and "none was run" in res.stderr
    assert not (tmp_path / "points").exists() and "queued" not in res.stdout
