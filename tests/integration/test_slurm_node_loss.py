"""A node lost and a rank crashed under srun, on the real local Slurm cluster: the repeat
is recorded `failed` in seconds with its cause, not `timeout` after timeout_s, and the
sweep goes on. No mock of any Slurm command.

Losing node3 is SIGKILL to every process in its network namespace (slurmd, slurmstepd,
the rank), as a power cut; the `node3_back` fixture restarts its slurmd afterwards, so
the Slurm tests that run later in the session find three idle nodes again.
"""
import os
import time

import pytest

from tests.integration.test_local_e2e import crashing_python
from tests.integration.test_slurm_launcher import (SMOKE, jload, job_of, launch, point_dirs,
                                                    release_requeued, slurm, status, status_lines,
                                                    wait_for)

pytestmark = pytest.mark.slurm
LOST = "node3"


@pytest.fixture
def node3_back(slurm_cluster):
    """node3 answers and takes jobs after the test, whatever the test did to it."""
    yield slurm_cluster
    slurm_cluster.restart_node(LOST)


def point_of(sweep, shape: str) -> str:
    return next(p for p in point_dirs(sweep) if f"-{shape}-" in os.path.basename(p))


def job_state(job: str) -> str:
    return slurm("squeue", "-h", "-j", job, "-o", "%T")


def table(text: str) -> dict:
    """The status table only: the failed ranks' log tails follow it after a blank line."""
    return status_lines(text.split("\n\n")[0])


def test_a_lost_node_fails_its_repeat_in_seconds_and_the_sweep_goes_on(node3_back, tmp_path):
    cluster = node3_back
    # 3 nodes x 1 rank, 2 repeats of about 30 s of training each (the loss comes 2 s after
    # the rendezvous; repeat 1 must then run whole); timeout_s far away
    res = launch(*SMOKE, "nodes=3", "gpus_per_node=1", "repeats=2", "measure_steps=600",
                 "timeout_s=1800", f"hydra.run.dir={tmp_path}")
    assert res.returncode == 0, res.stderr[-3000:]
    big = point_dirs(tmp_path)[0]
    job = job_of(big)
    try:
        wait_for(lambda: os.path.exists(f"{big}/repeat-00/step.json"), what="repeat 0 to start")
        # node3's rank is past its rendezvous: the store and both peers connected
        wait_for(lambda: cluster.connections(LOST) >= 3, timeout=180, what="the ranks to connect")
        time.sleep(2)
        killed_at = time.time()
        cluster.kill_node(LOST)

        wait_for(lambda: os.path.exists(f"{big}/repeat-00/run.json"), timeout=120,
                 what="repeat 0 to be recorded")
        recorded_s = time.time() - killed_at
        run = jload(f"{big}/repeat-00/run.json")
        print(f"node killed -> repeat recorded failed: {recorded_s:.0f} s")
        assert run["status"] == "failed", run
        # the first cause is a surviving rank's broken collective; the lost rank is named
        assert run["error"].endswith("no record from rank(s) 2 (on node3)"), run["error"]
        assert run["cause_rank"] in (0, 1) and run["lost_ranks"] == [2]
        assert run["rank_ends"]["2"] == {"exit_code": None, "signal": None, "node": LOST,
                                         "stopped": True}
        assert run["log_tail"]["rank"] == run["cause_rank"] and run["log_tail"]["lines"]
        assert run["ended_unix"] - run["started_unix"] < 300  # not timeout_s=1800

        # node3 is gone: the driver runs no repeat on it. Meanwhile a 1-node point of the
        # same sweep runs on the nodes that are left.
        small = launch(*SMOKE, "nodes=1", "gpus_per_node=1", "repeats=1", f"hydra.run.dir={tmp_path}")
        assert small.returncode == 0, small.stderr[-3000:]
        # Slurm sets node3 DOWN and requeues the job (no double counting: repeat 0 stays)
        wait_for(lambda: job_state(job) == "PENDING", timeout=240, what="the job to be requeued")
        requeued_s = time.time() - killed_at
        print(f"node killed -> job requeued: {requeued_s:.0f} s")
        lines = table(status(tmp_path, timeout=60).stdout)
        state, counts, _, detail = lines[os.path.basename(big)]
        assert (state, counts) == ("PENDING", "0/1/2") and detail.startswith("waiting: "), detail
        # No repeat ran after the loss in this allocation. Who ended it is a race: the driver's
        # own probe of node3 (after the failure grace and the step's end), or Slurm marking
        # node3 DOWN (SlurmdTimeout after its last answered ping) and cancelling the job first.
        log = open(jload(f"{big}/slurm.json")["log"]).read()
        by_driver = "node(s) unreachable (node3:" in log and "no more repeats in this allocation" in log
        by_slurm = "DUE TO NODE FAILURE" in log and "got SIGTERM: the allocation is ending" in log
        assert by_driver or by_slurm, log
        assert "repeat 1: srun" not in log

        cluster.restart_node(LOST)
        release_requeued(job)
        waited = status(tmp_path, "--wait", "--timeout", "420", "--interval", "2")
        lines = table(waited.stdout)
        second = f"{big}/repeat-01"
        assert lines[os.path.basename(big)][:2] == ("FAILED", "1/2/2"), \
            waited.stdout + open(f"{second}/srun.log").read() + open(f"{second}/run.json").read()
        assert lines[os.path.basename(point_of(tmp_path, "1x1"))][:2] == ("COMPLETED", "1/1/1")
        assert jload(f"{big}/repeat-00/run.json") == run  # recorded once, never rerun
        assert jload(f"{big}/repeat-01/run.json")["status"] == "ok"
        assert jload(f"{big}/repeat-01/step.json")["restarts"] == 1
    finally:
        slurm("scancel", job)


def test_a_rank_crashed_by_a_signal_under_srun_is_named_and_its_log_kept(slurm_cluster, tmp_path):
    script = crashing_python(tmp_path)  # echoes two lines, then kill -SEGV $$
    t0 = time.time()
    res = launch(*SMOKE, "nodes=2", "gpus_per_node=1", "repeats=1", f"framework.python={script}",
                 f"hydra.run.dir={tmp_path / 'sweep'}")
    assert res.returncode == 0, res.stderr[-3000:]
    waited = status(tmp_path / "sweep", "--wait", "--timeout", "180", "--interval", "1")
    assert waited.returncode == 1, waited.stdout + waited.stderr
    pdir = point_dirs(tmp_path / "sweep")[0]
    run = jload(f"{pdir}/repeat-00/run.json")
    assert run["status"] == "failed"
    first, second = (run["rank_ends"][r]["node"] for r in ("0", "1"))  # one rank per node
    assert first != second and {first, second} <= {"node1", "node2", "node3"}
    assert run["error"] == (f"rank 0 ({first}) left no record: killed by SIGSEGV; "
                            f"no record from rank(s) 1 (on {second})"), run["error"]
    assert run["rank_ends"]["0"] == {"exit_code": None, "signal": "SIGSEGV", "node": first,
                                     "stopped": False}
    # srun's per-task output file holds both streams; their order is slurmstepd's
    assert run["log_tail"]["rank"] == 0
    assert sorted(run["log_tail"]["lines"]) == ["about to crash", "loading the model"]
    assert time.time() - t0 < 120  # srun ends when the last rank dies: no grace to wait out
    assert "Segmentation fault" in open(f"{pdir}/repeat-00/srun.log").read()

    shown = status(tmp_path / "sweep", timeout=60).stdout
    state, counts, _, detail = table(shown)[os.path.basename(pdir)]
    assert (state, counts) == ("FAILED", "0/1/1") and "killed by SIGSEGV" in detail
    assert "    about to crash" in shown

