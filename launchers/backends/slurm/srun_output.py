"""What srun says about a step's tasks (repeat-NN/srun.log), parsed.

srun prints one line per node for the tasks that ended badly, and nothing for the ones
that exited 0:

    srun: error: node1: task 0: Exited with exit code 3
    srun: error: node2: tasks 2-3: Killed
    srun: error: node1: tasks 0,2-3: Segmentation fault (core dumped)
    srun: error: Node failure on node3

A signal comes as libc's strsignal text ("Segmentation fault", "Killed", "Aborted"),
mapped back to its name here. Standard library only.
"""
import re
import signal

TASK_END = re.compile(r"^srun: error: (?P<node>[^\s:]+): tasks? (?P<tasks>[\d,\-]+): (?P<how>.+?)\s*$")
EXIT = re.compile(r"^Exited with exit code (\d+)$")
NODE_FAILURE = re.compile(r"^srun: error: Node failure on (\S+)\s*$")
CORE_DUMPED = " (core dumped)"


def _signal_names() -> dict:
    """strsignal text -> name, e.g. 'Segmentation fault' -> 'SIGSEGV', for this libc."""
    names: dict = {}
    for sig in signal.Signals:
        text = signal.strsignal(sig)
        if text:
            names.setdefault(text, sig.name)
    return names


SIGNAL_NAMES = _signal_names()


def task_ids(text: str) -> list:
    """'0,2-3' -> [0, 2, 3]."""
    out: list = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        if first.isdigit() and (not last or last.isdigit()):
            out += range(int(first), int(last or first) + 1)
    return out


def describe(how: str) -> dict:
    """srun's words for one task's end -> {exit_code, signal}. An unknown description
    stays as it was said, in `signal`, rather than be lost."""
    m = EXIT.match(how)
    if m:
        return {"exit_code": int(m.group(1)), "signal": None}
    how = how[:-len(CORE_DUMPED)] if how.endswith(CORE_DUMPED) else how
    return {"exit_code": None, "signal": SIGNAL_NAMES.get(how, how)}


def task_ends(text: str) -> dict:
    """rank -> {exit_code, signal, node} for every task srun reported ending badly (the
    first report of a task wins: a later one is srun's own kill of what was left)."""
    ends: dict = {}
    for line in text.splitlines():
        m = TASK_END.match(line.strip())
        if not m:
            continue
        for rank in task_ids(m.group("tasks")):
            ends.setdefault(rank, dict(describe(m.group("how")), node=m.group("node")))
    return ends


def failed_nodes(text: str) -> list:
    """Nodes srun says failed under the step ('Node failure on node3'), in order."""
    out = []
    for line in text.splitlines():
        m = NODE_FAILURE.match(line.strip())
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def ended_badly(end: dict) -> bool:
    """A task that failed of itself: a non-zero exit or a signal, other than SIGTERM
    (which comes from outside: a cancel, a preemption, the driver's own stop)."""
    if end.get("signal"):
        return end["signal"] != "SIGTERM"
    return end.get("exit_code") not in (None, 0, 128 + signal.SIGTERM)
