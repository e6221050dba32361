"""What a sweep came to when `python -m launch` returns: its exit status by the one table
(contract/exits.py) and, when that is not 0, one line naming the points that did not pass.

The points are read as `launch status` reads them, from their records alone (no launcher is
asked): a local sweep's points have all ended; a point of a launcher that queues (`queues`:
Slurm) not yet recorded is queued, and its outcome is `launch status SWEEP --wait`'s; one
recorded before (a rerun into the folder queues nothing for it) counts. A search counts by its
own line, not its tries'.
"""
import launchers
from contract import exits, statuses
from launchers.commands import status


def _queues(owner) -> bool:
    return owner is not None and launchers.get(owner).queues

SHOWN = 3  # points named in the line; the rest counted


def ended(folder: str, names) -> dict:
    """name -> state (launch status's words) of each of `names` whose outcome is known now."""
    names, out = set(names), {}
    for p in status.read_points(folder):
        if p["name"] not in names or p["try_of"]:
            continue
        state = status.point_state(p, None)[0]
        if _queues(p["owner"]) and len(p["runs"]) < p["expected"] and state != status.STATE[statuses.UNHEALTHY]:
            continue  # queued
        out[p["name"]] = state
    for s in status.read_searches(folder):
        if s["name"] in names and not (_queues(s["owner"]) and not s["ledger"].get("done")):
            out[s["name"]] = status.search_state(s, None)[0]
    return out


def of_sweeps(ran: list) -> tuple:
    """(exit status, a line or None) of the sweeps launch ran: [(folder, point names)]."""
    code, bad, counted, folders = exits.OK, [], 0, []
    for folder, names in ran:
        states = ended(folder, names)
        counted += len(states)
        code = max(code, exits.of(states.values()))
        failed = [f"{n} {s}" for n, s in states.items() if exits.of([s]) != exits.OK]
        bad += failed
        if failed:
            folders.append(folder)
    if code == exits.OK:
        return code, None
    more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    return code, (f"sweep: {len(bad)} of {counted} point(s) did not pass ({', '.join(bad[:SHOWN])}{more}): "
                  f"python -m launch status {' '.join(folders)}")
