"""`python -m launch status SWEEP [--wait] [--timeout S] [--interval S]`: where each point stands.

    python -m launch status outputs/2026-11-21_10-00-00
    python -m launch status outputs/2026-11-21_10-00-00 --wait --timeout 3600     # in a script

One line per point: its state, its repeats (ok / recorded / expected), its job and a detail
(the first error, or what is missing). The state combines the point's owner as its launcher
sees it now (launchers/backends/base.py `live`: a Slurm job by squeue while the controller
holds it, else sacct, its id in SWEEP/points/<p>/slurm.json; a local launcher's process, its
pid in SWEEP/points/<p>/local.json) with the records (run.json per repeat):

    PENDING, RUNNING                  the owner's, while it lives (a pending job's reason from
                                      squeue: Resources, ReqNodeNotAvail, ...; a local point
                                      RUNNING while its launcher lives and has not ended it)
    COMPLETED                         every repeat recorded and ok
    FAILED, OOM, TIMEOUT, CANCELLED,  the worst recorded repeat's status when every repeat is
    UNSUPPORTED                       recorded; else the allocation's end (a cancelled job,
                                      a driver that died: FAILED); CANCELLED also a point
                                      `launch cancel` stopped, once its owner has ended
    UNHEALTHY                         preflight=true found too few healthy nodes: no repeat ran
    RUNNING                           also a point of no known owner (a local sweep of another
                                      host, or older than local.json) whose rank 0 beats now;
                                      the detail of a running point: `running: repeat 4/7,
                                      step 52/120` (its heartbeat, contract/heartbeat.py)
    INCOMPLETE                        repeats missing and nothing more will come: a local
                                      launcher that stopped or died first (its pid, which),
                                      a job Slurm no longer knows, no owner and no live heartbeat

The records' reading is statuses.point_status's (contract/statuses.py), mapped to
Slurm's words here. A point with preflight=true says which nodes its preflight left out and
why (SWEEP/points/<p>/preflight.json, launchers/driver/preflight.py).
A point cancelled by `python -m launch cancel` stays CANCELLED once Slurm forgets its job, or its
local launcher has ended.

A search (`search=`, launchers/driver/search.py) is one line of its own, named by its point, from
its ledger (SWEEP/searches/<p>.json) and, on Slurm, its one job (SWEEP/points/<p>/slurm.json):
ok/rec/exp counts its tries (ok / tried / -), the detail its answer. Its tries are points
(<p>-<key>=<value>); once every repeat of a try is recorded, the try is final, though the
search's job runs on. OOM tries are the search's data: with --wait, the search's own line
counts, not its tries'.

Each call asks each launcher about all of its points at once (on Slurm one squeue call and at
most one sacct call, however many points: launchers/backends/slurm/watch.py).
Exit status (the suite's one table, docs/statuses.md): 0; with --wait, 0 when every point and
search COMPLETED (or UNSUPPORTED: an answer), 1 when one did not, 3 when --timeout passed
first; 2 when SWEEP holds no points and no searches.
"""
import argparse
import glob
import os
import sys
import time

try:
    from orjson import loads as _loads  # a 1,000-point sweep is read in tenths of a second
except ImportError:
    from json import loads as _loads  # type: ignore[assignment]  # json's signature, orjson's differs

import launchers
from contract import exits, heartbeat, paths, secrets, statuses

# A point's status (statuses.point_status) in Slurm's words, which every launcher's are.
STATE = {"ok": "COMPLETED", "failed": "FAILED", "oom": "OOM", "timeout": "TIMEOUT",
         "cancelled": "CANCELLED", "unsupported": "UNSUPPORTED", statuses.UNHEALTHY: "UNHEALTHY",
         **{s: s.upper() for s in statuses.STORAGE}}   # a checkpoint's storage: DISK_FULL, ...
ENDS = ("COMPLETED", "FAILED", "TIMEOUT", "OOM", "CANCELLED")   # how an owner ends (base.Live)
FINAL = ENDS + ("INCOMPLETE", "UNSUPPORTED", "UNHEALTHY") + tuple(s.upper() for s in statuses.STORAGE)
POINT_FILES = os.path.join("SWEEP", paths.POINTS_DIR, "*", paths.POINT_FILE)  # in messages
TAIL_LINES = 5  # of a failed point's log shown under the table (-v: all that run.json keeps)


def _json(path):
    try:
        with open(path, "rb") as f:
            return _loads(f.read())
    except (OSError, ValueError):  # orjson's JSONDecodeError and json's are ValueErrors
        return None


def read_points(sweep: str) -> list:
    """Every point of the sweep with its records: [{name, dir, expected, owner, runs,
    running, try_of}] (owner: the launcher whose record the folder holds, launchers.owner;
    try_of: the search a try belongs to, else None)."""
    out = []
    for pfile in sorted(glob.glob(os.path.join(sweep, paths.POINTS_DIR, "*", paths.POINT_FILE))):
        pdir = os.path.dirname(pfile)
        point = _json(pfile) or {}
        repeats = int(point.get("repeats") or 0)
        try:
            names = set(os.listdir(pdir))
        except OSError:
            names = set()
        begun = {r for r in range(repeats) if paths.repeat_name(r) in names}
        runs = {}
        for r in sorted(begun):  # only where the repeat's folder is: 1,000 points stay fast
            run = _json(os.path.join(paths.repeat_dir(pdir, r), paths.RUN_FILE))
            if run is not None:
                runs[r] = run
        if any(run.get("error") or run.get("log_tail") for run in runs.values()):
            known = secrets.found(point)   # an old sweep's secrets, masked where shown
            runs = {r: secrets.masked(run, values=known) for r, run in runs.items()}
        search = point.get("search")
        out.append({"name": os.path.basename(pdir), "dir": pdir, "expected": repeats,
                    "owner": launchers.owner(pdir), "runs": runs,
                    "preflight": _json(os.path.join(pdir, paths.PREFLIGHT_FILE))
                    if paths.PREFLIGHT_FILE in names else None,
                    "running": sorted(begun - set(runs)),
                    "heartbeat": heartbeat.read(pdir) if paths.HEARTBEAT_FILE in names else None,
                    "try_of": search.get("base") if isinstance(search, dict) else None,
                    "try_value": search.get("value") if isinstance(search, dict) else None})
    return out


def read_searches(sweep: str) -> list:
    """Every search of the sweep: [{name, dir, ledger, owner}] (owner: as read_points')."""
    out = []
    for path in paths.search_files([sweep]):
        ledger = _json(path)
        if isinstance(ledger, dict) and isinstance(ledger.get("point"), str):
            pdir = paths.point_dir(sweep, ledger["point"])
            out.append({"name": ledger["point"], "dir": pdir, "ledger": ledger,
                        "owner": launchers.owner(pdir)})
    return out


def is_sweep(sweep: str) -> bool:
    return bool(glob.glob(os.path.join(sweep, paths.POINTS_DIR, "*", paths.POINT_FILE))
                or paths.search_files([sweep]))


def search_state(s: dict, live=None):
    """(state, detail) of one search from its ledger and its owner now (base.Live, or None:
    no owner known)."""
    ledger = s["ledger"]
    tries, key = ledger.get("tries") or [], ledger.get("key")
    ok = [t["value"] for t in tries if t.get("outcome") == "ok"]
    if ledger.get("done"):
        if ledger.get("stopped"):
            return "FAILED", f"search {key} stopped at {ledger['stopped']}"
        found = ledger.get("largest_ok")
        oom = ledger.get("smallest_oom")
        return "COMPLETED", (f"largest {key} that trains: {'none' if found is None else found}"
                             + (f", smallest out of memory: {oom}" if oom is not None else ""))
    so_far = f"search {key}: {len(tries)} tried" + (f", largest ok so far {max(ok)}" if ok else "")
    if live is None:
        return "INCOMPLETE", f"{so_far}; not finished"
    state = live.state
    if state in ("PENDING", "RUNNING"):
        return state, "; ".join(filter(None, [
            f"waiting: {live.reason}" if state == "PENDING" and live.reason else "", so_far]))
    if live.cancelled and state in (None, "CANCELLED"):
        return "CANCELLED", f"{so_far}; cancelled"
    if state in ENDS:
        return ("FAILED" if state == "COMPLETED" else state,
                f"{so_far}; the job ended {state.lower()} before the search did"
                + (f"; driver log: {live.log}" if live.log and state != "CANCELLED" else ""))
    return "INCOMPLETE", f"{so_far}; {live.gone}"


def left_out(pre) -> str:
    """What a point's preflight left out, in words ('' when nothing)."""
    excluded = (pre or {}).get("excluded") or {}
    if not excluded:
        return ""
    return "preflight left out " + "; ".join(f"{node} ({', '.join(why)})"
                                             for node, why in sorted(excluded.items()))


def point_state(p: dict, live=None):
    """(state, detail) of one point from its owner now (base.Live, or None: no owner known)
    and its records."""
    state, detail = _point_state(p, live)
    return state, "; ".join(filter(None, [detail, left_out(p.get("preflight"))
                                          if state != "UNHEALTHY" else ""]))


def running(p: dict, now=None):
    """'running: repeat 4/7, step 52/120' where rank 0's heartbeat is live for a repeat not yet
    recorded; 'running: repeat 5/7, starting' where it is fresh and a later repeat has begun
    (its ranks start: within STALE_S of the last beat); else None."""
    hb = p.get("heartbeat")
    if hb is None or not heartbeat.fresh(hb, now):
        return None
    if heartbeat.live(hb, now) and hb["repeat"] not in p["runs"]:
        return heartbeat.running_line(hb, p["expected"])
    later = [r for r in p["running"] if r > hb["repeat"]]
    return f"running: repeat {later[-1] + 1}/{p['expected']}, starting" if later else None


def _point_state(p: dict, live):
    runs, expected = p["runs"], p["expected"]
    beating = running(p)
    pre = p.get("preflight") or {}
    ended = [run.get("status") for run in runs.values()]
    status = statuses.point_status(ended, expected, pre.get("outcome"))
    bad = [runs[r] for r in sorted(runs) if runs[r].get("status") != "ok"]
    first_error = next((f"repeat {b['repeat']}: {b.get('error') or b.get('status')}" for b in bad), "")
    # A search's try once recorded is final: the search's job runs on, the try is not rerun.
    settled = p.get("try_of") and len(runs) == expected
    state = live.state if live else None
    if state in ("PENDING", "RUNNING") and not settled:
        detail = first_error or (beating or f"repeat {p['running'][-1]} running"
                                 if state == "RUNNING" and p["running"] else "")
        if state == "PENDING" and live.reason:  # why it waits: BeginTime after a requeue, ...
            detail = "; ".join(filter(None, [f"waiting: {live.reason}", detail]))
        return state, detail
    if status == statuses.UNHEALTHY:
        return STATE[status], pre.get("error") or "preflight found too few healthy nodes"
    if len(runs) == expected:
        if status == "partial":  # some ok: named by the worst of the others
            status = statuses.point_status([s for s in ended if s != "ok"], expected)
        return STATE.get(status, "FAILED"), first_error
    missing = expected - len(runs)
    gone = f"{missing} repeat(s) not recorded"
    if live is None:  # no owner known: a local sweep older than local.json, or another host's
        if beating:  # its launcher runs it now
            return "RUNNING", "; ".join(filter(None, [beating, first_error]))
        return "INCOMPLETE", first_error or gone
    if state is None and live.cancelled:  # its owner has ended, or Slurm forgot; `cancel` did not
        return "CANCELLED", first_error or f"cancelled with {gone}"
    if state in ("CANCELLED", "TIMEOUT", "OOM", "FAILED"):
        hint = f"; driver log: {live.log}" if state == "FAILED" and live.log else ""
        return state, first_error or f"the job ended {state.lower()} with {gone}{hint}"
    if state == "COMPLETED":
        return "FAILED", first_error or f"the job completed with {gone}"
    # Its owner is gone (a local launcher stopped or died; a job the controller and
    # accounting have both forgotten, no slurmdbd): records only, and why no more will come.
    return "INCOMPLETE", first_error or f"{gone}; {live.gone}"


def observe(sweep: str) -> tuple:
    """(points, searches, {folder: base.Live}, notes): the sweep's records, and each point's
    owner as its launcher sees it now, every launcher asked once for all of its points."""
    pts, searches = read_points(sweep), read_searches(sweep)
    live, notes = {}, []
    for name, folders in launchers.owners(x["dir"] for x in searches + pts).items():
        seen, note = launchers.get(name).live(folders)
        live.update(seen)
        notes += [note] if note else []
    return pts, searches, live, notes


def states(sweep: str, notes=None) -> list:
    """One row per search and point; what a launcher could not be asked goes to `notes`."""
    pts, searches, live, said = observe(sweep)
    if notes is not None:
        notes += said
    rows = []
    for s in searches:
        own = live.get(s["dir"])
        state, detail = search_state(s, own)
        tries = s["ledger"].get("tries") or []
        rows.append({"point": s["name"], "state": state, "recorded": len(tries), "expected": "-",
                     "ok": sum(t.get("outcome") == "ok" for t in tries),
                     "job": own.job if own else "-", "detail": detail, "tail": None, "try_of": None})
    for p in pts:
        own = live.get(p["dir"])
        state, detail = point_state(p, own)
        ok = sum(run.get("status") == "ok" for run in p["runs"].values())
        bad = next((p["runs"][r] for r in sorted(p["runs"]) if p["runs"][r].get("log_tail")
                    and p["runs"][r].get("status") != "ok"), None)
        rows.append({"point": p["name"], "state": state, "ok": ok, "recorded": len(p["runs"]),
                     "expected": p["expected"], "job": own.job if own else "-", "detail": detail,
                     "tail": bad and dict(bad["log_tail"], repeat=bad.get("repeat")),
                     "try_of": p["try_of"], "try_value": p["try_value"]})
    # a search's line, then its tries by value
    return sorted(rows, key=lambda r: (r["try_of"] or r["point"], r.get("try_value") or -1, r["point"]))


def render_tails(rows: list, lines: int = TAIL_LINES) -> str:
    """The last lines of the log of each point's first bad repeat: why, at a glance."""
    out = []
    for r in rows:
        t = r.get("tail")
        if t and t.get("lines"):
            shown = t["lines"][-lines:] if lines else t["lines"]
            out.append(f"{r['point']} repeat {t['repeat']}, rank {t['rank']}'s log "
                       f"(last {len(shown)} lines):")
            out += [f"    {line}" for line in shown]
    return "\n".join(out)


def render(rows: list) -> str:
    head = ("point", "state", "ok/rec/exp", "job", "detail")
    table = [(r["point"], r["state"], f"{r['ok']}/{r['recorded']}/{r['expected']}", str(r["job"]),
              r["detail"]) for r in rows]
    widths = [max(len(str(x[i])) for x in [head] + table) for i in range(4)]
    lines = ["  ".join(str(x[i]).ljust(widths[i]) for i in range(4)) + "  " + x[4] for x in [head] + table]
    return "\n".join(line.rstrip() for line in lines)


def progress(rows: list, elapsed: float, width: int = 30) -> str:
    done = sum(r["state"] in FINAL for r in rows)
    counts: dict = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    fill = int(width * done / max(1, len(rows)))
    parts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
    return f"[{'#' * fill}{'.' * (width - fill)}] {done}/{len(rows)} points final ({parts}) " \
           f"{int(elapsed) // 60}:{int(elapsed) % 60:02d}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launch status", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", help=f"the sweep folder ({POINT_FILES})")
    parser.add_argument("--wait", action="store_true", help="wait until every point is final")
    parser.add_argument("--timeout", type=float, default=None, help="with --wait: give up after S seconds")
    parser.add_argument("--interval", type=float, default=5.0, help="with --wait: seconds between polls")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show every kept log line of a failed rank, not the last few")
    args = parser.parse_args(argv)
    if not is_sweep(args.sweep):
        print(f"error: {args.sweep} is not a sweep: no {POINT_FILES} under it", file=sys.stderr)
        return exits.REFUSED
    notes: list = []
    rows = states(args.sweep, notes)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    tails = lambda: render_tails(rows, 0 if args.verbose else TAIL_LINES)  # noqa: E731
    if not args.wait:
        print("\n\n".join(filter(None, [render(rows), tails()])))
        return exits.OK
    t0 = time.monotonic()
    tty = sys.stderr.isatty()
    last = None
    while True:
        line = progress(rows, time.monotonic() - t0)
        if tty:
            print("\r" + line, end="", file=sys.stderr, flush=True)
        elif line.split(")")[0] != last:  # a new line only when the counts change
            print(line, file=sys.stderr, flush=True)
            last = line.split(")")[0]
        if all(r["state"] in FINAL for r in rows):
            break
        if args.timeout is not None and time.monotonic() - t0 > args.timeout:
            if tty:
                print(file=sys.stderr)
            print(render(rows))
            print(f"timed out after {args.timeout:.0f}s: "
                  f"{sum(r['state'] not in FINAL for r in rows)} point(s) not final", file=sys.stderr)
            return exits.GAVE_UP
        time.sleep(args.interval)
        rows = states(args.sweep)
    if tty:
        print(file=sys.stderr)
    print("\n\n".join(filter(None, [render(rows), tails()])))
    return exits.of(r["state"] for r in rows if not r["try_of"])
