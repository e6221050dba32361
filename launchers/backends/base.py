"""What every backend is: one launcher object (launchers/backends/local.py,
launchers/backends/slurm/launcher.py) over this base, and what they share to start ranks.

The sweep (launchers/plan/sweep.py) gets the object from `launchers.get(name)` and calls
`check` for every point before any runs, then `submit` with all of its points. In the
allocation (here, or the Slurm driver's), the driver (launchers/driver/: the repeat loop,
the preflight, the search) is handed the object and calls `start_repeat`, `health_step`,
`where` and `resubmit_without`;
`launch health` (launchers/commands/health.py) calls `health`. Nothing outside a backend
asks which backend it holds.
"""
import abc
from typing import Any, Callable, Optional

from contract.point import Point

from launchers.backends import step
from launchers.health import step as health_step


class NoVerdict(RuntimeError):
    """A health job ended without a verdict: said in one line, exit status 1."""


class Launcher(abc.ABC):
    """One backend. On the submitting host: `check`, `submit`, `health`. In an allocation
    (the object the backend builds there): `start_repeat`, `health_step`, `where`,
    `resubmit_without`."""

    name: Optional[str] = None
    FAILURE_GRACE_S = 30  # launcher.failure_grace_s where the point leaves it unset

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
