"""Exit statuses: one table for every command (a sweep, `status`, `status --wait`, `cancel`,
`health`, `certify`, `doctor`, `dataset`, the gpu-check; docs/statuses.md, "Exit statuses").

    0     everything asked for has its answer: every point COMPLETED or UNSUPPORTED (the
          device or framework lacks what it asks: an answer, said in its line), a point an
          exclude rule skipped and a check or stage skipped for a reason said are no failure;
          a Slurm sweep's points queued (their outcome is `status --wait`'s); a dry run
    1     something ran and did not pass: a point failed, ran out of memory, timed out, lost
          its node, was cancelled or left repeats unrecorded; a sick node; FAIL; a check FAILED
    2     refused before anything ran: bad input, or what it needs is not there, in one line
    3     gave up waiting: `status --wait --timeout S` passed before every point was final
    128+N stopped by signal N (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP): the ranks stopped with it

Standard library only: the gpu-check asks it before the suite's other needs are imported.
"""
import signal
from collections.abc import Iterable

OK, FAILED, REFUSED, GAVE_UP = 0, 1, 2, 3
# Endings that are answers, not failures, in any command's words (a point's status, `launch
# status`'s state, a gpu-check row, a health or doctor check), compared in lower case.
ANSWERS = ("ok", "completed", "unsupported", "skipped")


def interrupted(name: str) -> int:
    """The exit status of a command stopped by the signal `name` ('SIGINT'): 128 + its number."""
    return 128 + signal.Signals[name].value


def of(endings: Iterable[object]) -> int:
    """OK when every ending (a point's status or state, a stage's, a check's) is an answer,
    else FAILED; nothing at all is OK (nothing was asked, or every point was skipped)."""
    return OK if all(str(e).lower() in ANSWERS for e in endings) else FAILED
