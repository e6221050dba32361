"""What a running srun step's files say so far, read cheaply by the driver every second
(launchers/slurm_driver.py): the rank records that appeared (each read once: a record is
written whole, never rewritten) and srun.log (read on from where the last look stopped,
parsed by launchers/srun_output.py)."""
import json
import os

from contract import paths
from launchers import srun_output


class StepWatch:
    def __init__(self, rdir: str, world: int):
        self.rdir, self.world = rdir, world
        self.records = {}  # rank -> status of its record
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
