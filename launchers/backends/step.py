"""The step runner: one step's ranks (a repeat's, or a health step's) run to their end by one
rule, whichever backend started them (`Ranks`: an srun step on Slurm,
launchers/backends/slurm/step_watch.py; processes here, launchers/backends/local.py).

    outcome = step.run(ranks, timeout_s, grace_s, what, log)

The rule: the ranks are looked at every POLL_S (their exits, their records, srun's report).
A rank that ends badly gives the others `grace_s` to end of themselves (they write records
that name the cause); past it, or past `timeout_s`, or once the owner got a stop signal
(SIGINT, SIGTERM, SIGHUP: launchers/backends/stopping.py), the runner stops the step:
SIGTERM (a rank writes a `cancelled` record and ends, within frameworks/common/sigterm.py's
GIVE_UP_S even in the middle of a step), SIGKILL to what is left, then a last wait. A second
stop signal kills the ranks at once. A step that outlives SIGKILL is its backend's to settle
(`Ranks.abandon`: on Slurm an srun that waits on a lost node is left to Slurm). While the
allocation ends under the step (Slurm's SIGTERM to the driver) the stop is quick: Slurm
itself is signalling the ranks.

The grace is the caller's: a repeat's is its launcher's (`launcher.failure_grace_s`), a
health step's its own (launchers/health/step.py). The waits are the same everywhere.
"""
import abc
import time
from dataclasses import dataclass
from typing import Optional

from launchers.backends import stopping

POLL_S = 0.5          # a failure is seen within it; a step's end at once (the wait is on it)
TERM_S = 10           # SIGTERM -> SIGKILL after a failure (the others wait on the failed rank
                      # in a collective, where a signal seldom reaches Python) or a stop signal
TIMEOUT_TERM_S = 30   # the same at the timeout: the ranks are working, they end the step they
                      # are in and write `cancelled` (Slurm's own KillWait is 30 s)
KILL_S = 15           # SIGKILL -> the step given up (srun waits on a lost node's tasks)
ENDING_S = (1, 5)     # TERM and KILL waits while the allocation ends: Slurm is ending the step


class Ranks(abc.ABC):
    """The ranks of one running step, as the runner sees them; each backend has its own."""

    def poll(self) -> None:
        """Read what the ranks left so far (records, srun's report)."""

    @abc.abstractmethod
    def running(self) -> bool:
        """Whether the step still runs."""

    @abc.abstractmethod
    def wait(self, seconds: float) -> bool:
        """Wait up to `seconds` for the step to end: True when it has."""

    @abc.abstractmethod
    def first_bad(self) -> Optional[str]:
        """Why the step already failed, in words ('rank 1 on node2: SIGKILL'), or None."""

    @abc.abstractmethod
    def unended(self) -> set:
        """The ranks with no known end: the ones a stop now would stop."""

    @abc.abstractmethod
    def signal(self, name: str) -> None:
        """Send SIGTERM ("TERM") or SIGKILL ("KILL") to the step's ranks still running."""

    @abc.abstractmethod
    def ends(self) -> dict:
        """rank -> {exit_code, signal, node}: how ranks ended, as the step saw it of itself."""

    @abc.abstractmethod
    def rank_ends(self, stopped) -> dict:
        """rank -> {exit_code, signal, node, stopped}: every rank's end (statuses.run_outcome)."""

    def ending(self) -> bool:
        """Whether the allocation is ending under the step: Slurm signals the ranks itself."""
        return False

    def abandon(self, force: bool) -> None:
        """The step outlived SIGKILL: end what is left of it (`force`), or leave it be."""

    def close(self) -> None:
        """After the step, however it ended: what its ranks left behind."""


@dataclass(frozen=True)
class Outcome:
    stop: Optional[str] = None       # why the runner stopped the step: "timeout", "failure",
                                     # "cancelled" (the owner's stop signal)
    first: Optional[str] = None      # the first failure, in words (None: no rank failed)
    grace_s: float = 0
    stopped: frozenset = frozenset()  # the ranks the stop ended

    @property
    def ended_by(self) -> Optional[str]:
        """What ended the repeat from outside (statuses.run_outcome): "timeout",
        "cancelled" or None."""
        return self.stop if self.stop in ("timeout", "cancelled") else None

    @property
    def failed(self) -> bool:
        return self.first is not None


def run(ranks: Ranks, timeout_s: float, grace_s: float, what: str, log=print) -> Outcome:
    """Wait for the step by the rule above -> how it ended."""
    deadline = time.monotonic() + float(timeout_s)
    first, failed_at, killed = None, None, set()

    def kill_now():  # a second stop signal, maybe before this loop saw the first
        killed.update(ranks.unended())
        ranks.signal("KILL")
    try:
        with stopping.watching(kill_now):
            while ranks.running():
                ranks.poll()
                now = time.monotonic()
                if stopping.received():
                    log(f"{what}: {stopping.cause()}; stopping it")
                    return Outcome("cancelled", first, grace_s, stop(ranks, TERM_S))
                if now >= deadline:
                    log(f"{what}: past its timeout ({float(timeout_s):g} s); stopping it")
                    return Outcome("timeout", first, grace_s, stop(ranks, TIMEOUT_TERM_S))
                if failed_at is None:
                    first = ranks.first_bad()
                    if first:
                        failed_at = now
                        log(f"{what}: {first}; the other ranks have {grace_s:g} s to end")
                if failed_at is not None and now - failed_at >= grace_s:
                    log(f"{what}: rank(s) {sorted(ranks.unended())} still running "
                        f"{now - failed_at:.0f} s after a failure; stopping it")
                    return Outcome("failure", first, grace_s, stop(ranks, TERM_S))
                ranks.wait(POLL_S)
        if killed:
            return Outcome("cancelled", first, grace_s, frozenset(killed))
        return Outcome(None, first, grace_s)
    except BaseException:  # a requeue's SystemExit, an interrupt: leave no rank running
        stop(ranks, TERM_S, force=True)
        raise
    finally:
        ranks.close()


def stop(ranks: Ranks, term_s: float, force: bool = False) -> frozenset:
    """SIGTERM, SIGKILL after `term_s`, then KILL_S; the step's backend settles what outlives
    that (`force`: end it). Returns the ranks this stopped: those with no known end yet."""
    ranks.poll()
    stopped = frozenset(ranks.unended())
    kill_s = KILL_S
    if ranks.ending():
        (term_s, kill_s), force = ENDING_S, True
    for name, wait_s in (("TERM", term_s), ("KILL", kill_s)):
        until = time.monotonic() + wait_s  # the signal itself can take seconds (a dead node's)
        ranks.signal(name)
        if ranks.wait(max(0.1, until - time.monotonic())):
            return stopped
    ranks.abandon(force)
    return stopped
