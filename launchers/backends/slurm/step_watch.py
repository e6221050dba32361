"""A running srun step as the step runner (launchers/backends/step.py) sees it: `SrunRanks`.
What its files say so far is read cheaply at every look (`StepWatch`): the rank records that
appeared (each read once: a record is written whole, never rewritten) and srun.log (read on
from where the last look stopped, parsed by srun_output.py)."""
import json
import os
import subprocess

from contract import paths
from launchers.backends import step
from launchers.backends.slurm import srun, srun_output


class StepWatch:
    def __init__(self, rdir: str, world: int):
        self.rdir, self.world = rdir, world
        self.records: dict = {}  # rank -> status of its record
        self.text, self._seen = "", 0  # srun.log so far, whole lines; bytes read

    def poll(self) -> None:
        try:
            names = os.listdir(self.rdir)
        except OSError:
            names = []
        for name in names:
            m = paths.RANK_RECORD_RE.match(name)
            rank = int(m.group(1)) if m else None
            if rank is not None and rank not in self.records and rank < self.world:
                try:
                    with open(os.path.join(self.rdir, name)) as f:
                        self.records[rank] = json.load(f).get("status")
                except (OSError, ValueError):
                    pass  # not there after all: the next look reads it
        try:
            with open(os.path.join(self.rdir, paths.SRUN_LOG), "rb") as f:
                f.seek(self._seen)
                new = f.read()
        except OSError:
            return
        whole = new[:new.rfind(b"\n") + 1]  # a line still being written waits for the next look
        self.text += whole.decode(errors="replace")
        self._seen += len(whole)

    def ends(self) -> dict:
        return srun_output.task_ends(self.text)

    def first_bad(self):
        """Why the step already failed, in words, or None: a rank whose record is neither
        ok nor cancelled, or a task srun saw crash or exit non-zero that left no such
        `cancelled` record (a cancelled rank was stopped from outside: not a failure)."""
        for rank, status in sorted(self.records.items()):
            if status not in ("ok", "cancelled"):
                return f"rank {rank} ended {status}"
        for rank, end in sorted(self.ends().items()):
            if srun_output.ended_badly(end) and self.records.get(rank) != "cancelled":
                how = end["signal"] or f"exit code {end['exit_code']}"
                return f"rank {rank} on {end['node']}: {how}"
        return None

    def unended(self) -> set:
        """Ranks neither recorded nor reported ended: the ones a stop now would stop."""
        ends = self.ends()
        return {r for r in range(self.world) if r not in self.records and r not in ends}

    def rank_ends(self, hosts: list, gpus_per_node: int, srun_code, stopped) -> dict:
        """rank -> {exit_code, signal, node, stopped}. srun reports the tasks that ended
        badly; one it did not report exited 0 if srun succeeded or the rank wrote its record,
        else its end is unknown (None: srun gave up on it, e.g. on a node that vanished).
        Rank r runs on node r // gpus_per_node (block distribution, --ntasks-per-node)."""
        ends, out = self.ends(), {}
        for rank in range(self.world):
            node = hosts[rank // gpus_per_node] if rank // gpus_per_node < len(hosts) else None
            end = ends.get(rank) or {"exit_code": 0 if srun_code == 0 or rank in self.records
                                     else None, "signal": None}
            out[rank] = {"exit_code": end["exit_code"], "signal": end["signal"], "node": node,
                         "stopped": rank in stopped}
        return out


class SrunRanks(step.Ranks):
    """One srun step of an allocation (launchers/backends/slurm/launcher.py `Allocation`),
    for the step runner: srun's process, the step's files, scancel for its signals."""

    def __init__(self, proc, folder: str, point, allocation, log):
        self.proc, self.point, self.allocation, self.log = proc, point, allocation, log
        self.watch = StepWatch(folder, point.world_size)

    def poll(self) -> None:
        self.watch.poll()

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, seconds: float) -> bool:
        try:
            self.proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def first_bad(self):
        return self.watch.first_bad()

    def unended(self) -> set:
        return self.watch.unended()

    def signal(self, name: str) -> None:
        srun.scancel_steps(self.allocation.job_id, signal=name)

    def ending(self) -> bool:
        return bool(self.allocation.ending)

    def abandon(self, force: bool) -> None:
        """srun still waits after SIGKILL (on a lost node's tasks). Ending it then, like a
        plain `scancel STEP` (or srun's --kill-on-bad-exit), makes the controller queue a
        SIGKILL for those tasks, retried about every minute until the node answers again,
        where it kills the same-numbered step of the requeued job (Slurm 22.05); signals
        (`scancel --signal`) are not queued. So it is left running until the next step
        (Allocation.end_lingering), unless `force` (the allocation ends, an interrupt)."""
        if force:
            self.proc.kill()
            self.proc.wait()
            return
        self.allocation.lingering = self.proc
        self.log(f"srun still waits on rank(s) {sorted(self.watch.unended())} after SIGKILL: left "
                 "to Slurm (killing it would queue a kill for their node)")

    def close(self) -> None:
        self.watch.poll()  # srun's last words

    def ends(self) -> dict:
        return self.watch.ends()

    def rank_ends(self, stopped) -> dict:
        return self.watch.rank_ends(self.allocation.hosts, self.point.gpus_per_node,
                                    self.proc.returncode, stopped)
