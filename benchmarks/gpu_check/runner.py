"""Each stage of a GPU check in its own process group under its own time limit, so that a stage
that fails or hangs costs only itself; skipped when the budget left cannot hold it.

A stage's limit is the smaller of its own and what the budget has left after the reserve
(the table, the reports, the tarball); under MIN_S it does not start. Past its limit the
stage gets SIGINT (the launcher stops its ranks on an interrupt: launchers/backends/step.py),
then SIGKILL to its process group after GRACE_S. Its output goes to OUT/logs/<stage>.log.
"""
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from typing import Optional

MIN_S = 20          # a stage with less time than this left is skipped
GRACE_S = 25        # after SIGINT: the launcher's own stop (SIGTERM, 10 s, SIGKILL) and its record


@dataclass
class Ran:
    """How a stage's command ended: `rc` (None: not started), `why` not, its seconds, log."""
    stage: str
    rc: Optional[int] = None
    seconds: float = 0.0
    why: Optional[str] = None     # why it did not run, or was stopped
    log: Optional[str] = None
    limit: int = 0


class Budget:
    def __init__(self, seconds: float, reserve: float):
        self.t0, self.seconds, self.reserve = time.monotonic(), seconds, reserve

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        """What a stage may still take: the budget's rest less the reserve."""
        return self.seconds - self.elapsed() - self.reserve


def run(stage, ctx, budget: Budget, env: dict, say=print) -> Ran:
    limit = int(min(stage.limit(ctx.device), budget.left()))
    if limit < MIN_S:
        return Ran(stage.name, why=f"skipped: {budget.left():.0f} s of the budget left")
    ctx = replace(ctx, limit=limit)
    argv = stage.argv(ctx)
    if isinstance(argv, str):
        return Ran(stage.name, why=f"skipped: {argv}")
    logs = os.path.join(ctx.out, "logs")
    os.makedirs(logs, exist_ok=True)
    log = os.path.join(logs, f"{stage.name}.log")
    say(f"=== {stage.name} (limit {limit} s, t={budget.elapsed():.0f} s)")
    t0 = time.monotonic()
    with open(log, "w") as f:
        f.write(" ".join([sys.executable, *argv]) + "\n")
        f.flush()
        proc = subprocess.Popen([sys.executable, *argv], stdout=f, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        why = None
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            why = f"stopped past its limit of {limit} s"
            rc = _stop(proc)
    ran = Ran(stage.name, rc=rc, seconds=time.monotonic() - t0, why=why, log=log, limit=limit)
    say(f"=== {stage.name}: rc {rc} in {ran.seconds:.0f} s" + (f" ({why})" if why else ""))
    return ran


def _stop(proc) -> int:
    """SIGINT to the stage's process group, SIGKILL after GRACE_S."""
    for sig, wait in ((signal.SIGINT, GRACE_S), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()
