"""The stored Slurm jobs' states refreshed from the real test cluster's accounting: a job that
ran is COMPLETED, a job id accounting never knew is PURGED; where accounting does not answer
nothing changes (docs/results-store.md)."""
import json
import os

import pytest

from analysis.store import database as store
from launchers.backends.slurm import sacct
from tests.integration.test_slurm_launcher import slurm, wait_for
from tests.store_scenario import T0, run, sweep

pytestmark = pytest.mark.slurm


def test_states_from_sacct_and_a_job_it_no_longer_knows(slurm_cluster, tmp_path, capsys):
    job = slurm("sbatch", "--parsable", "--output=/dev/null", "--wrap=true")
    assert job.isdigit(), job
    s = sweep(tmp_path, "A", T0, [1.0])
    point_dir = os.path.join(s, "points", os.listdir(os.path.join(s, "points"))[0])
    with open(os.path.join(point_dir, "slurm.json"), "w") as f:
        json.dump({"job_id": job, "previous_jobs": ["999999"]}, f)   # 999999: never submitted
    accounting = "accounting_storage/slurmdbd" in slurm("scontrol", "show", "config")
    if accounting:   # slurmdbd learns the job's end a moment after the controller
        wait_for(lambda: (sacct.accounting([job]) or {}).get(job) == "COMPLETED", timeout=120,
                 what=f"accounting to know job {job} COMPLETED")
    db = str(tmp_path / "results.sqlite")
    code, out, err = run(capsys, "store", "add", s, "--store", db)
    assert code == 0, err
    code, out, err = run(capsys, "store", "refresh", "--store", db)
    assert code == 0, err
    states = {j: state for _, j, state in store.Store(db, write=False).jobs()}
    if not accounting:   # the cluster runs without slurmdbd: sacct does not answer, nothing changes
        assert "accounting does not answer" in out and states == {job: None, "999999": None}
        pytest.skip("the test cluster's accounting does not answer sacct: only that branch ran")
    assert "2 Slurm job(s) asked: 1 known to accounting, 1 no longer known to sacct" in out
    assert states == {job: "COMPLETED", "999999": store.PURGED}
