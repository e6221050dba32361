"""`python -m launch certify SUITE [key=value ...]`: does this cluster deliver what it should?
(docs/certify.md)

    python -m launch certify smoke certify.baseline=none          # measure and record
    python -m launch certify smoke certify.baseline=outputs/certify-2026-11-27_10-00-00
    python -m launch certify h100x8 nodes=4 cluster=mysite         # against the published figures

SUITE is conf/certify/SUITE.yaml (certify/suite.py). The keys:

    nodes, gpus_per_node, launcher, cluster   the system under test (the suite's by default):
                                              its items run at 1 node and at all of them, or as
                                              the suite says
    certify.baseline=     not given: the suite's published rows where they match its points,
                          else the newest earlier certification of the suite on this system,
                          else none (the first certification records the baseline); or
                          published (each item's published row, as its suite names it),
                          none (measure and record, judge nothing), a folder (an earlier
                          certification or a sweep), an archive (.tar.zst), store:NAME, or a
                          reference file (the regression gate's format: .yaml, .yml, .json)
    certify.threshold=    the fraction of its baseline a point must deliver (default 0.95, or
                          the suite's; given here, it replaces every item's); lower-is-better
                          metrics inverted
    certify.dir=          the certification's folder (default OUTPUT_ROOT/certify-<time>);
                          run again into it, only what is not yet recorded runs
    certify.store=        the results store it is added to (default: as the report's)
    health.*=             the health gate's settings, over the suite's

In order: every item's points made and checked, and the baseline matched to them, before
anything runs; the health gate on the nodes asked for (a sick node fails the certification,
named, and nothing is measured); each item's sweep, waited for; each point judged
(certify/verdict.py); CERT/verdict.json; the report (CERT/report/, the verdict first), added to
the results store; the archive CERT.tar.zst with each file's sha256, verified.

Exit status: 0 when every judged point passed (or, with nothing judged, all were recorded);
1 when the health gate or any point failed (each failing point a line of the table: FAIL,
measured, baseline, ratio); 2 when it could not run (one line why: an unknown suite, a bad
key or value, a threshold <= 0, a baseline that matches no item).
"""
import contextlib
import io
import os
import sys
import time
from collections import Counter
from typing import Any

from analysis.read import archive
from analysis.read.load import load
from analysis.read.record_file import RecordError
from analysis.sections import certification
from certify import baselines as base
from certify import judge, run
from certify import suite as suites
from certify import verdict as rule
from contract import exits, paths, records
from launchers import auto
from launchers import suite as checkout
from launchers.health import verdict as health_verdict
from launchers.suite import ConfigError

SYSTEM = ("nodes", "gpus_per_node", "launcher", "cluster")
SETTINGS = ("baseline", "threshold", "dir", "store")
OUTPUT_ROOT = "outputs"   # conf/config.yaml's: where certify.dir goes by default
NOT_JUDGED = "NOT JUDGED"
# The command line's parts, what `prepare` decided, and verdict.json's content: values of several
# kinds (a Suite, Baselines, a system's ints and names, JSON) read by key: Any.
Decided = dict[str, Any]


class Refused(Exception):
    """Bad input: `lines` said, exit status 2, nothing run."""

    def __init__(self, *lines: str | list[str]) -> None:
        self.lines = [line for part in lines for line in (part if isinstance(part, list) else [part])]
        super().__init__("; ".join(self.lines))


def parse(argv: list[str]) -> Decided:
    """{suite, system, settings, health} from the command line; Refused on a bad key."""
    words = [a for a in argv if "=" not in a]
    if len(words) != 1:
        raise Refused("usage: python -m launch certify SUITE [key=value ...] (suites: "
                      f"{', '.join(suites.names()) or 'none'})")
    out: Decided = {"suite": words[0], "system": {}, "settings": {}, "health": []}
    for arg in (a for a in argv if "=" in a):
        key, value = arg.split("=", 1)
        if key in SYSTEM:
            if key in ("nodes", "gpus_per_node"):
                number = int(value) if value.isdigit() else None
                if number is None or number < 1:
                    raise Refused(f"{key} must be an integer >= 1, got {value!r}")
                out["system"][key] = number
            else:
                out["system"][key] = value
        elif key.startswith("certify.") and key[len("certify."):] in SETTINGS:
            out["settings"][key[len("certify."):]] = value
        elif key.startswith("health."):
            out["health"].append(arg)
        else:
            raise Refused(f"unknown key {key!r} (valid: {', '.join(SYSTEM)}, "
                          f"{', '.join('certify.' + s for s in SETTINGS)}, health.*)")
    return out


def prepare(args: Decided) -> Decided:
    """Everything decided before anything runs: the suite, the system, the threshold, the
    folder, the baselines, every point planned and the baseline matched to them."""
    suite = suites.read(args["suite"])
    given = args["settings"]
    threshold = rule.threshold_of(given["threshold"]) if "threshold" in given else None
    system = run.system_of(suite, args["system"])
    folder = os.path.abspath(given.get("dir") or paths.certify_run_dir(OUTPUT_ROOT))
    baseline = given.get("baseline")
    if baseline and os.path.abspath(baseline) == folder:
        raise Refused(f"certify.baseline={baseline} is certify.dir: a certification is not its own baseline")
    baselines = base.resolve(baseline, suite, given.get("store")) if baseline else None
    gate, planned = run.plan(suite, system, folder, args["health"])
    if baselines is None:   # none given: published, an earlier certification, or the first
        baselines = base.default(suite, system, lambda b: judge.matched_before(planned, b),
                                 os.path.dirname(folder), folder, given.get("store"))
    elif baselines.kind != base.NONE and not judge.matched_before(planned, baselines):
        why = ("its items name no published row (each says why: certify.baseline=none measures "
               "and records them)" if baselines.kind == base.PUBLISHED else
               f"none of its {len(baselines.entries)} entries is the configuration of a point of "
               f"suite {suite.name}")
        raise Refused(f"certify.baseline={baseline} matches no item: {why}")
    return {"suite": suite, "system": system, "threshold": threshold, "folder": folder,
            "auto": run.asked(suite, args["system"]) == "auto",
            "baselines": baselines, "gate": gate, "planned": planned, "store": given.get("store")}


def health_summary(h: dict[str, Any], folder: str, gate: run.Gate) -> dict[str, Any]:
    """What verdict.json keeps of the gate's verdict (its whole: CERT/health-<time>/health.json)."""
    return {"ok": bool(h.get("ok")), "hosts": h.get("hosts") or [], "sick": h.get("sick") or {},
            "slow_links": [{k: link.get(k) for k in ("src", "dst", "gbytes_s", "below", "why")}
                           for link in h.get("slow_links") or ()], "error": h.get("error"),
            "file": os.path.relpath(os.path.join(gate[0].dir, paths.HEALTH_FILE), folder)}


def certify(p: Decided) -> Decided:
    """The health gate, the items, each point judged -> verdict.json's content."""
    started = time.time()
    os.makedirs(p["folder"], exist_ok=True)
    health = run.health_gate(p["gate"])
    if health.get("nodes"):
        print(health_verdict.render(health))
    if health.get("ok"):
        run.run_items(p["planned"])
        results = load(p["folder"], merge=True)   # its items' sweeps (verdict.json comes next)
        rows = judge.rows(p["planned"], p["baselines"], results, p["suite"], p["threshold"])
    else:
        rows = judge.not_run(p["planned"], p["suite"], p["threshold"])
    word, code = rule.overall([r["verdict"] for r in rows], bool(health.get("ok")))
    why = None
    if health.get("ok") and p["baselines"].kind != base.NONE and code != 1 \
            and all(r["baseline"] is None for r in rows):
        devices = sorted({(r["provenance"] or {}).get("device") or "?" for r in rows})
        word, code = NOT_JUDGED, 2
        why = (f"certify.baseline={p['baselines'].kind} {p['baselines'].name}".rstrip() +
               f" matches no point measured (on {', '.join(devices)}): nothing was judged")
    counts = Counter(r["verdict"] for r in rows)
    s = p["suite"]
    return {"schema": paths.CERTIFICATION_SCHEMA, "version": paths.SCHEMA_VERSION,
            "name": os.path.basename(p["folder"]), "suite": s.name,
            "suite_file": os.path.relpath(s.path, checkout.ROOT), "suite_sha256": s.sha256,
            "description": s.description, "suite_commit": checkout.commit(),
            "created_unix": started, "finished_unix": time.time(), "system": p["system"],
            "baseline": p["baselines"].as_dict(), "threshold": p["threshold"],
            "verdict": word, "exit_code": code, "why": why,
            "counts": {v: counts.get(v, 0) for v in (rule.PASS, rule.FAIL, rule.MEASURED, rule.NOT_RUN)},
            "health": health_summary(health, p["folder"], p["gate"]), "items": rows,
            "report": os.path.join(paths.REPORT_DIR, "report.html"),
            "archive": archive.default_out(p["folder"])}


def report(folder: str, store: str | None = None) -> None:
    """The certification's report (the verdict first) and its add to the results store: the
    report's own command, its long text kept out of the terminal (CERT/report/ has it all)."""
    from analysis.__main__ import main as analysis
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        code = analysis(["report", folder, *(["--store", store] if store else [])])
    for line in text.getvalue().splitlines():
        if line.startswith(("page: ", "store ")):
            print(f"report: {line}" if line.startswith("page") else line)
    if code:
        print(f"warning: the report of {folder} ended with status {code}", file=sys.stderr)


def archived(folder: str) -> str:
    """CERT.tar.zst, written whole, then read back and checked against its manifest."""
    out, manifest = archive.write(folder)
    with archive.unpacked(out) as (_, damaged):
        if damaged:
            raise RecordError(f"archive {out}: {len(damaged)} file(s) do not match its manifest")
    return f"archive: {out}: {len(manifest['files'])} files, each file's sha256 in its manifest, verified"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return exits.OK
    try:
        p = prepare(parse(argv))
    except (Refused, suites.SuiteError, base.BaselineError) as exc:
        for line in getattr(exc, "lines", [str(exc)]):
            print(f"error: {line}", file=sys.stderr)
        return exits.REFUSED
    except (ConfigError, ValueError, RecordError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return exits.REFUSED
    t0 = time.monotonic()
    points = sum(len(x.made) for x in p["planned"])
    s, b = p["system"], p["baselines"]
    if p["auto"]:
        print(auto.say())
    print(f"certify: suite {p['suite'].name}, {points} points of {len(p['planned'])} items on "
          f"{s['nodes']}x{s['gpus_per_node']} (launcher {s['launcher']}, cluster {s['cluster']}); "
          f"baseline {b.kind} {b.name}".rstrip() + (f" ({b.why})" if b.why else "") + f"; {p['folder']}")
    try:
        doc = certify(p)
    except (ConfigError, judge.Ambiguous, RecordError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return exits.REFUSED
    except OSError as exc:
        print(f"error: cannot write under {p['folder']}: {exc.strerror or exc}", file=sys.stderr)
        return exits.REFUSED
    records.write_json_atomic(os.path.join(p["folder"], paths.VERDICT_FILE), doc)
    print(certification.render(dict(doc, folder=p["folder"])))
    report(p["folder"], p["store"])
    try:
        print(archived(p["folder"]))
    except RecordError as exc:
        print(f"warning: {exc}", file=sys.stderr)
    print(f"certify: {doc['verdict']} in {time.monotonic() - t0:.0f} s "
          f"({os.path.join(p['folder'], paths.VERDICT_FILE)})")
    if doc["why"]:
        print(f"error: {doc['why']}", file=sys.stderr)
    code: int = doc["exit_code"]   # certify's own `code`, an exit status
    return code
