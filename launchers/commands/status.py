"""`python -m launch status SWEEP [--wait] [--timeout S] [--interval S]`: where each point stands.

    python -m launch status outputs/2026-11-21_10-00-00
    python -m launch status outputs/2026-11-21_10-00-00 --wait --timeout 3600     # in a script

One line per point: its state, its repeats (ok / recorded / expected), its Slurm job and
a detail (the first error, or what is missing). The state combines Slurm's view of the
point's allocation (squeue while the controller holds the job, else sacct; the job id is
in SWEEP/points/<p>/slurm.json) with the records (run.json per repeat):

    PENDING, RUNNING                  the allocation's, while it lives (a pending job's
                                      reason from squeue: Resources, ReqNodeNotAvail, ...)
    COMPLETED                         every repeat recorded and ok
    FAILED, OOM, TIMEOUT, CANCELLED,  the worst recorded repeat's status when every repeat is
    UNSUPPORTED                       recorded; else the allocation's end (a cancelled job,
                                      a driver that died: FAILED)
    UNHEALTHY                         preflight=true found too few healthy nodes: no repeat ran
    RUNNING                           also a local-launcher point whose rank 0 beats now; the
                                      detail of a running point, local or Slurm: `running:
                                      repeat 4/7, step 52/120` (its heartbeat, contract/heartbeat.py)
    INCOMPLETE                        a local-launcher point with repeats missing and no live
                                      heartbeat (nothing more will come)

The records' reading is statuses.point_status's (contract/statuses.py), mapped to
Slurm's words here. A point with preflight=true says which nodes its preflight left out and
why (SWEEP/points/<p>/preflight.json, launchers/driver/preflight.py).
Points of local-launcher sweeps have no slurm.json: their state comes from the records alone.
A point cancelled by `python -m launch cancel` stays CANCELLED once Slurm forgets its job.

A search (`search=`, launchers/driver/search.py) is one line of its own, named by its point, from
its ledger (SWEEP/searches/<p>.json) and, on Slurm, its one job (SWEEP/points/<p>/slurm.json):
ok/rec/exp counts its tries (ok / tried / -), the detail its answer. Its tries are points
(<p>-<key>=<value>); once every repeat of a try is recorded, the try is final, though the
search's job runs on. OOM tries are the search's data: with --wait, the search's own line
counts, not its tries'.

Each call asks Slurm about every job at once (launchers/backends/slurm/sacct.py): one squeue call and at
most one sacct call, however many points.
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

from contract import exits, heartbeat, paths, secrets, statuses
from launchers.backends.slurm import sacct

# A point's status (statuses.point_status) in Slurm's words.
STATE = {"ok": "COMPLETED", "failed": "FAILED", "oom": "OOM", "timeout": "TIMEOUT",
         "cancelled": "CANCELLED", "unsupported": "UNSUPPORTED", statuses.UNHEALTHY: "UNHEALTHY",
         **{s: s.upper() for s in statuses.STORAGE}}   # a checkpoint's storage: DISK_FULL, ...
FINAL = sacct.FINAL + ("INCOMPLETE", "UNSUPPORTED", "UNHEALTHY") + tuple(s.upper() for s in statuses.STORAGE)
POINT_FILES = os.path.join("SWEEP", paths.POINTS_DIR, "*", paths.POINT_FILE)  # in messages
TAIL_LINES = 5  # of a failed point's log shown under the table (-v: all that run.json keeps)


def _json(path):
    try:
        with open(path, "rb") as f:
            return _loads(f.read())
    except (OSError, ValueError):  # orjson's JSONDecodeError and json's are ValueErrors
        return None


def read_points(sweep: str) -> list:
    """Every point of the sweep with its records: [{name, dir, expected, slurm, runs,
    running, try_of}] (try_of: the search a try belongs to, else None)."""
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
                    "slurm": _json(os.path.join(pdir, paths.SLURM_FILE)), "runs": runs,
                    "preflight": _json(os.path.join(pdir, paths.PREFLIGHT_FILE))
                    if paths.PREFLIGHT_FILE in names else None,
                    "running": sorted(begun - set(runs)),
                    "heartbeat": heartbeat.read(pdir) if paths.HEARTBEAT_FILE in names else None,
                    "try_of": search.get("base") if isinstance(search, dict) else None,
                    "try_value": search.get("value") if isinstance(search, dict) else None})
    return out


def read_searches(sweep: str) -> list:
    """Every search of the sweep: [{name, ledger, slurm}] (slurm: its job, None locally)."""
    out = []
    for path in paths.search_files([sweep]):
        ledger = _json(path)
        if isinstance(ledger, dict) and isinstance(ledger.get("point"), str):
            pdir = paths.point_dir(sweep, ledger["point"])
            out.append({"name": ledger["point"], "ledger": ledger,
                        "slurm": _json(os.path.join(pdir, paths.SLURM_FILE))})
    return out


def is_sweep(sweep: str) -> bool:
    return bool(glob.glob(os.path.join(sweep, paths.POINTS_DIR, "*", paths.POINT_FILE))
                or paths.search_files([sweep]))


def search_state(s: dict, slurm_state, reason=None):
    """(state, detail) of one search from its ledger and its job's Slurm state."""
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
    if s["slurm"] and slurm_state in ("PENDING", "RUNNING"):
        return slurm_state, "; ".join(filter(None, [
            f"waiting: {reason}" if slurm_state == "PENDING" and reason else "", so_far]))
    if s["slurm"] and s["slurm"].get("cancelled_unix") and slurm_state in (None, "CANCELLED"):
        return "CANCELLED", f"{so_far}; cancelled"
    if s["slurm"] and slurm_state in ("CANCELLED", "TIMEOUT", "OOM", "FAILED", "COMPLETED"):
        log = s["slurm"].get("log")
        return ("FAILED" if slurm_state == "COMPLETED" else slurm_state,
                f"{so_far}; the job ended {slurm_state.lower()} before the search did"
                + (f"; driver log: {log}" if log and slurm_state != "CANCELLED" else ""))
    if s["slurm"]:
        return "INCOMPLETE", f"{so_far}; Slurm no longer knows job {s['slurm'].get('job_id')}"
    return "INCOMPLETE", f"{so_far}; not finished"


def left_out(pre) -> str:
    """What a point's preflight left out, in words ('' when nothing)."""
    excluded = (pre or {}).get("excluded") or {}
    if not excluded:
        return ""
    return "preflight left out " + "; ".join(f"{node} ({', '.join(why)})"
                                             for node, why in sorted(excluded.items()))


def point_state(p: dict, slurm_state, reason=None):
    """(state, detail) of one point from its Slurm state (None: unknown or local), the
    reason squeue gives a pending job (None: none), and records."""
    state, detail = _point_state(p, slurm_state, reason)
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


def _point_state(p: dict, slurm_state, reason=None):
    runs, expected = p["runs"], p["expected"]
    beating = running(p)
    pre = p.get("preflight") or {}
    ended = [run.get("status") for run in runs.values()]
    status = statuses.point_status(ended, expected, pre.get("outcome"))
    bad = [runs[r] for r in sorted(runs) if runs[r].get("status") != "ok"]
    first_error = next((f"repeat {b['repeat']}: {b.get('error') or b.get('status')}" for b in bad), "")
    # A search's try once recorded is final: the search's job runs on, the try is not rerun.
    settled = p.get("try_of") and len(runs) == expected
    if p["slurm"] and slurm_state in ("PENDING", "RUNNING") and not settled:
        detail = first_error or (beating or f"repeat {p['running'][-1]} running"
                                 if slurm_state == "RUNNING" and p["running"] else "")
        if slurm_state == "PENDING" and reason:  # why it waits: BeginTime after a requeue, ...
            detail = "; ".join(filter(None, [f"waiting: {reason}", detail]))
        return slurm_state, detail
    if status == statuses.UNHEALTHY:
        return STATE[status], pre.get("error") or "preflight found too few healthy nodes"
    if len(runs) == expected:
        if status == "partial":  # some ok: named by the worst of the others
            status = statuses.point_status([s for s in ended if s != "ok"], expected)
        return STATE.get(status, "FAILED"), first_error
    missing = expected - len(runs)
    gone = f"{missing} repeat(s) not recorded"
    if not p["slurm"]:
        if beating:  # the local launcher runs it now
            return "RUNNING", "; ".join(filter(None, [beating, first_error]))
        return "INCOMPLETE", first_error or gone
    if slurm_state is None and p["slurm"].get("cancelled_unix"):  # Slurm forgot; `cancel` did not
        return "CANCELLED", first_error or f"cancelled with {gone}"
    if slurm_state in ("CANCELLED", "TIMEOUT", "OOM", "FAILED"):
        log = p["slurm"].get("log")
        hint = f"; driver log: {log}" if slurm_state == "FAILED" and log else ""
        return slurm_state, first_error or f"the job ended {slurm_state.lower()} with {gone}{hint}"
    if slurm_state == "COMPLETED":
        return "FAILED", first_error or f"the job completed with {gone}"
    # The controller and accounting have both forgotten the job (no slurmdbd): records only.
    return "INCOMPLETE", first_error or f"{gone}; Slurm no longer knows job {p['slurm'].get('job_id')}"


def _slurm_info(x: dict, slurm_jobs: dict) -> tuple:
    """(the job x's slurm.json names or None, its {state, reason}). A pending job `launch cancel`
    cancelled is CANCELLED: scancel returned, and a loaded controller may list it pending a
    moment longer (a running one is shown running until it has ended)."""
    job = str((x["slurm"] or {}).get("job_id") or "") or None
    info = slurm_jobs.get(job) or {}
    if x["slurm"] and x["slurm"].get("cancelled_unix") and info.get("state") == "PENDING":
        return job, {"state": "CANCELLED", "reason": None}
    return job, info


def states(sweep: str) -> list:
    pts, searches = read_points(sweep), read_searches(sweep)
    ids = {str(x["slurm"]["job_id"]) for x in pts + searches if x["slurm"] and x["slurm"].get("job_id")}
    slurm_jobs = sacct.jobs(sorted(ids)) if ids else {}
    rows = []
    for s in searches:
        job, info = _slurm_info(s, slurm_jobs)
        state, detail = search_state(s, info.get("state"), info.get("reason"))
        tries = s["ledger"].get("tries") or []
        rows.append({"point": s["name"], "state": state, "recorded": len(tries), "expected": "-",
                     "ok": sum(t.get("outcome") == "ok" for t in tries), "job": job or "-",
                     "detail": detail, "tail": None, "try_of": None, "slurm_state": info.get("state")})
    for p in pts:
        job, info = _slurm_info(p, slurm_jobs)
        state, detail = point_state(p, info.get("state"), info.get("reason"))
        ok = sum(run.get("status") == "ok" for run in p["runs"].values())
        bad = next((p["runs"][r] for r in sorted(p["runs"]) if p["runs"][r].get("log_tail")
                    and p["runs"][r].get("status") != "ok"), None)
        rows.append({"point": p["name"], "state": state, "ok": ok, "recorded": len(p["runs"]),
                     "expected": p["expected"], "job": job or "-", "detail": detail,
                     "tail": bad and dict(bad["log_tail"], repeat=bad.get("repeat")),
                     "try_of": p["try_of"], "try_value": p["try_value"],
                     "slurm_state": info.get("state")})
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
    rows = states(args.sweep)
    jobs = {r["job"] for r in rows if r["job"] != "-"}
    if jobs and all(r["slurm_state"] is None for r in rows if r["job"] != "-"):
        print(f"note: neither squeue nor sacct knows any of the sweep's {len(jobs)} Slurm job(s): "
              "states come from the records alone (is SLURM_CONF set, does the controller "
              "answer?)", file=sys.stderr)
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
