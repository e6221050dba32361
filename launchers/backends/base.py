"""What every backend is: one launcher object (launchers/backends/local.py,
launchers/backends/slurm/launcher.py) over this base, and what they share to start ranks.

The sweep (launchers/plan/sweep.py) gets the object from `launchers.get(name)` and calls
`check` for every point before any runs, then `submit` with all of its points. In the
allocation (here, or the Slurm driver's), the driver (launchers/driver/: the repeat loop,
the preflight, the search) is handed the object and calls `start_repeat`, `health_step`,
`where` and `resubmit_without`;
`launch health` (launchers/commands/health.py) calls `health`. From outside, on a sweep's
folders: `launch status` calls `live` (each point's owner now: a Slurm job, a local
launcher's process), `launch cancel` calls `cancel`, a sweep's outcome asks `queues`, and
`launch doctor` asks `no_site`. A point's folder names its backend by the record that backend
keeps there (launchers.owners). Nothing outside a backend asks which backend it holds.
"""
import abc
from dataclasses import dataclass
from typing import Any, Callable, Optional

from contract.point import Point

from launchers.backends import step
from launchers.health import step as health_step


class NoVerdict(RuntimeError):
    """A health job ended without a verdict: said in one line, exit status 1."""


@dataclass(frozen=True)
class Live:
    """A point's (or a search's) owner as its backend sees it now."""
    job: str                        # `launch status`'s job column: '123_4', 'pid 4242'
    state: Optional[str]            # PENDING, RUNNING, or its end as Slurm names it (COMPLETED,
                                    # FAILED, TIMEOUT, OOM, CANCELLED); None: gone, how unknown
    reason: Optional[str] = None    # why a PENDING one waits
    cancelled: bool = False         # `launch cancel` cancelled it
    log: Optional[str] = None       # its driver's log, where a failed end points
    gone: str = ""                  # state None in words: 'Slurm no longer knows job 5'


@dataclass(frozen=True)
class Cancelled:
    """What `launch cancel` did to some points of one backend."""
    said: str                       # one line: what was cancelled, or that nothing was left to
    errors: tuple[str, ...] = ()    # what could not be cancelled: exit status 1


class Launcher(abc.ABC):
    """One backend. On the submitting host: `check`, `submit`, `health`. In an allocation
    (the object the backend builds there): `start_repeat`, `health_step`, `where`,
    `resubmit_without`."""

    name: Optional[str] = None
    FAILURE_GRACE_S = 30  # launcher.failure_grace_s where the point leaves it unset
    # submit returns before the points run (queued): their outcome is `status --wait`'s
    queues = False
    # why `launch doctor` has no site to check with this backend (None: it has one)
    no_site: Optional[str] = None

    def __init__(self, log: Callable[..., object] = print) -> None:
        self.log = log

    # ---- on the submitting host ----------------------------------------------------------
    def check(self, point: Point) -> None:
        """Refuse, with launchers.suite.ConfigError, what this backend cannot do; called for
        every point of a sweep (made and checked by the planner) before any runs or is queued."""

    @abc.abstractmethod
    def submit(self, pts: list[Point], dry_run: bool = False) -> None:
        """Run or queue the sweep's points of this backend (every one checked), searches
        (`search=`) included; a dry run prints what would run, and runs nothing."""

    @abc.abstractmethod
    def health(self, point: Point) -> dict[str, Any]:
        """`launch health`: one health step in an allocation shaped like `point` -> verdict."""

    # ---- from outside, on a sweep's folders (SWEEP/points/<p>, whose record is this backend's)
    @abc.abstractmethod
    def live(self, folders: list[str]) -> tuple[dict[str, Live], Optional[str]]:
        """Each folder's owner now, asked at once -> ({folder: Live} for those this backend can
        tell of, a note where it could not be asked at all, else None)."""

    @abc.abstractmethod
    def cancel(self, sweep: str, folders: list[str]) -> Cancelled:
        """Stop whatever of these folders' points is queued or running, as this backend stops
        it, and mark them cancelled; their recorded repeats stay. launchers.suite.ConfigError
        when what it needs is not here."""

    # ---- in the allocation ---------------------------------------------------------------
    @abc.abstractmethod
    def start_repeat(self, point: Point, spec_path: str, rdir: str) -> tuple[dict[int, Any], Optional[str]]:
        """One repeat's ranks, started and run to their end -> (rank_ends, ended_by)."""

    @abc.abstractmethod
    def start_health(self, point: Point, spec_path: str, hdir: str) -> step.Ranks:
        """A health step's ranks (healthchecks/rank.py), started."""

    @abc.abstractmethod
    def hosts(self) -> list[str]:
        """The allocation's nodes, in rank order."""

    def where(self) -> dict[str, Any]:
        """The allocation, as preflight.json records each attempt's."""
        return {"job_id": None, "nodes": self.hosts()}

    @abc.abstractmethod
    def resubmit_without(self, point: Point, state: dict[str, Any]) -> str:
        """After a sick preflight: queue the point again without every node in
        state["excluded"] -> the new job's id; preflight.Unhealthy when it cannot be."""

    def failure_grace_s(self, point: Point) -> float:
        """After a rank of a repeat fails, the others' time before the stop."""
        grace = point.launcher.failure_grace_s
        return self.FAILURE_GRACE_S if grace is None else float(grace)

    def run_ranks(self, ranks: step.Ranks, point: Point, what: str) -> tuple[step.Outcome, dict[int, Any]]:
        """A repeat's ranks run to their end by the one rule -> (the outcome, rank_ends)."""
        outcome = step.run(ranks, point.timeout_s, self.failure_grace_s(point), what, self.log)
        return outcome, ranks.rank_ends(outcome.stopped)

    def health_step(self, point: Point, hdir: str) -> dict[str, Any]:
        """One health step in this allocation -> its verdict (launchers/health/step.py)."""
        return health_step.run(point, hdir, self)
