"""The allocation a Slurm job runs in, as its driver (the batch shell, on the first node)
sees it: the job's ids and hosts, whether the allocation is ending under it, and what the
last step left (nodes to probe, an srun left to Slurm).

How an allocation ends under a repeat: scancel, preemption, `scontrol requeue`, the requeue
signal before the time limit. The driver gets SIGTERM (`ending`: the owner's stop signal,
launchers/backends/stopping.py, the local launcher's rule too), the step runner stops the
step quickly (Slurm signals the ranks itself), and the repeat is not recorded
(AllocationEnding): it is moved aside whole and rerun by the requeued job.

A repeat that lost ranks without any exit status (their node vanished) leaves `suspects`:
before the next step the driver probes those nodes (sinfo, then their slurmd's port); when
one is down or unreachable it runs no more steps here, Slurm sets the node DOWN and requeues
the job (`scontrol requeue` by the driver if Slurm does not), and the driver exits, so the
unrecorded repeats run in a new allocation instead of hanging on the dead node.
"""
import os
import time

from launchers.backends import stopping
from launchers.backends.slurm import nodes
from launchers.driver import repeats

POLL_S = 1.0  # how often the wait for Slurm to end a job with a lost node looks


class AllocationEnding(BaseException):
    """The allocation is going away under a repeat: it must not be recorded."""


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} driver: {message}", flush=True)


class Allocation:
    def __init__(self):
        self.job_id = nodes.this_job()
        self.job_number = os.environ["SLURM_JOB_ID"]  # a number: the port block's slot
        self.restarts = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
        self.nodelist = os.environ["SLURM_JOB_NODELIST"]
        self.hosts = nodes.hostnames(self.nodelist)
        self.master = self.hosts[0]
        self.suspects = []     # nodes where the last repeat lost ranks without an exit status
        self.lingering = None  # an srun the stop left that still waits on such a node

    @classmethod
    def here(cls) -> "Allocation":
        """This job's allocation; its SIGTERM (cancel, preemption, requeue) sets `ending`."""
        alloc = cls()
        stopping.install(log, who="the driver", what="the allocation is ending")
        log(f"job {alloc.job_id} (start {alloc.restarts + 1}) on {os.uname().nodename}: "
            f"nodes {alloc.nodelist}, MASTER_ADDR={alloc.master}")
        return alloc

    @property
    def ending(self):
        """The stop signal the driver got ('SIGTERM': the allocation is ending), or None."""
        return stopping.received()

    def still_running(self) -> bool:
        return not self.ending and nodes.job_running(self.job_id)

    def end_lingering(self) -> None:
        """Before the next step: an srun left waiting on a node that answers again (or
        that no rank of the last repeat lost) can go now."""
        proc, self.lingering = self.lingering, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def leave_lost_nodes(self, rdir: str) -> None:
        """Run no repeat on a node that is gone: when the last repeat lost ranks without an
        exit status, probe their nodes; if one is down or unreachable, end this allocation
        so that the job is requeued (recorded repeats stay recorded; this one and the rest
        run in the next allocation)."""
        if not self.suspects:
            return
        t0 = time.monotonic()
        conf = nodes.slurm_config()
        bad = nodes.unreachable(self.suspects, conf.get("SlurmdPort", 6818))
        self.suspects = []
        if not bad:
            log(f"the node(s) of the ranks lost last repeat answer ({time.monotonic() - t0:.0f} s)")
            return
        why = "; ".join(f"{n}: {w}" for n, w in sorted(bad.items()))
        log(f"node(s) unreachable ({why}; probed in {time.monotonic() - t0:.0f} s): no more repeats "
            "in this allocation")
        if nodes.await_node_failure(sorted(bad), conf, self.job_id, lambda: self.ending, log, POLL_S):
            return  # they answer again: go on here
        if not self.ending:
            log(f"Slurm has not ended the job: requeueing job {self.job_id}")
            refused = nodes.requeue(self.job_id)
            if refused:
                log(f"scontrol requeue {self.job_id} failed: {refused}; the unrecorded repeats "
                    "run when the sweep is submitted again")
        repeats.set_aside(rdir)
        raise AllocationEnding(self.ending or f"node(s) {', '.join(sorted(bad))} unreachable")
