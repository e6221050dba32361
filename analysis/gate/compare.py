"""The regression gate: a run's figures against reference figures kept as data.

    python -m analysis reference RESULTS --out FILE [--tolerance 0.05] [--system NAME]
    python -m analysis compare RESULTS --reference FILE [--system NAME] [--tolerance T]
    python -m analysis compare RESULTS --reference published:NAME [--tolerance T]

The reference's files, entries and keys: analysis/gate/reference.py.

An entry matches the one point whose configuration agrees on every key it gives (keys:
CONFIG_KEYS, `model.<key>` for MODEL_KEYS, `search` for a search's key). The gate is
one-sided: a figure fails when it is worse than the reference by more than the tolerance;
better passes (say so, and refresh the reference). An entry without its point, or whose
point did not finish ok, fails too. Exit 0: all pass; 1: one fails; 2: bad input.

`--reference published:NAME` takes the entries from analysis/published/NAME.yaml
(analysis/published/sources.py): one throughput entry per published row (and per 1-device row a
stated speedup implies), keyed by the row's device (the same device by
analysis/figures/matching.py's rule), framework, model (full size), precision, device count
(`devices`) and batch per device where the row names one. A published row that no point
of the run matches is NOT RUN, which is not a failure; when no row matches at all the
comparison is bad input (exit 2). `--tolerance` replaces every entry's tolerance.

`--reference store` takes, for each configuration of the run (its device included), the
last ok point of the results store (analysis/store/database.py) from another sweep stored before it:
"this week against the last good run", however long ago its folder was deleted.
`--reference store:SWEEP` takes the points of that stored sweep (its name, key, path or
archive). A point with no stored baseline is left out, and said; none at all is bad input.
"""
import json
import math
import sys

import yaml
from tabulate import tabulate

from analysis import tables
from analysis.figures import matching
from analysis.gate.reference import (CONFIG_KEYS, METRICS, STORE, figures, make_reference,
                                     read_reference, stored_reference)
from analysis.published import sources as published
from analysis.read import images
from analysis.read.load import load
from analysis.read.record_file import RecordError
from analysis.terminal import say


def matches(row: dict, config: dict) -> bool:
    """Whether a figures row is an entry's configuration: every key the entry gives agrees
    (analysis/figures/matching.py's rule); an entry without `bench` is a training point's."""
    if "bench" not in config and (row.get("bench") or "train") != "train":
        return False
    for key, want in config.items():
        if key == "search":
            have = row.get("search")
        elif key == "device":   # the same name is the same device, a CPU's too
            if not (row.get("device") == want or matching.same_device(row.get("device"), want)):
                return False
            continue
        elif key.startswith("model."):
            have = row.get(key[len("model."):])
        else:
            have = row.get(CONFIG_KEYS[key])
        if tables.missing(have) or not matching.same(have, want):
            return False
    return True


def _describe(config: dict) -> str:
    """pytorch resnet50/full amp bs256 1x8 model.seq_len=2048: the entry's keys, briefly."""
    c = dict(config)
    name = "/".join(str(c.pop(k)) for k in ("model", "size") if k in c)
    words = [str(c.pop(k)) for k in ("framework",) if k in c] + ([name] if name else [])
    words += [str(c.pop(k)) for k in ("precision", "amp_dtype") if k in c]
    if "batch_size" in c:
        words.append(f"bs{c.pop('batch_size')}")
    if "nodes" in c and "gpus_per_node" in c:
        words.append(tables.allocation(c.pop("nodes"), c.pop("gpus_per_node")))
    if "compile" in c:
        words += ["compile"] if c.pop("compile") else []
    if "devices" in c:
        words.append(f"{c.pop('devices')} dev")
    if "device" in c:
        words.append(f"on {c.pop('device')}")
    return " ".join(words + [f"{k}={v}" for k, v in c.items()])


def verdicts(results, entries) -> list:
    """[(entry, value, delta, verdict)]: PASS, FAIL, MISSING, FAIL (the point's status), or
    UNSUPPORTED: the point cannot run on this machine (its reason is in the report), which
    is not a regression; the gate counts it apart and does not fail on it. A published entry
    (analysis/published/sources.py) without its point is NOT RUN, also counted apart, and one that
    matches several points gives a verdict for each (the entry's `point` names it)."""
    rows = figures(results)
    out = []
    for e in entries:
        kind = "search" if e["metric"] == "largest_ok" else "point"
        found = [r for r in rows if r["kind"] == kind and matches(r, e["config"])]
        if len(found) > 1 and e.get("published"):
            for row in found:
                out += verdicts_of(dict(e, point=row["point"]), row)
            continue
        if len(found) > 1:
            raise RecordError(f"reference entry {e['n']} ({_describe(e['config'])}) matches "
                              f"{len(found)} points: add configuration keys, or compare one sweep")
        if not found:
            out.append((e, None, None, "NOT RUN" if e.get("published") else "MISSING"))
            continue
        out += verdicts_of(dict(e, matched=(found[0].get("sweep"), found[0]["point"])), found[0])
    return out


def image_notes(results, found) -> list:
    """One line per entry measured in another container image than its point ran in (the
    reference's `image`, written by `reference`): not the same measurement
    (analysis/read/images.py)."""
    ran_in, notes = images.of_points(results), []
    for e, *_ in found:
        if "image" not in e or not e.get("matched"):
            continue
        mine = ran_in.get(e["matched"])
        if images.identity(mine) != e["image"]:
            notes.append(f"note: entry {e['n']} ({_describe(e['config'])}) was measured in image "
                         f"{e['image'] or 'none'}; point {e['matched'][1]} ran in "
                         f"{images.label(mine)}: not the same measurement")
    return notes


# a published MFU or TFLOP/s is judged against ours in its count, where the model's published
# figures count otherwise (docs/flops.md: Llama 3's full s x s, Megatron's GPT)
PUBLISHED_COUNT = {"mfu": "published_mfu", "tflops_per_device": "published_tflops_per_device"}


def verdicts_of(e: dict, row: dict) -> list:
    """[(entry, value, delta, verdict)] of one entry on the one point (or search) it matches."""
    value = row.get(METRICS[e["metric"]][0])
    theirs = row.get(PUBLISHED_COUNT.get(e["metric"], ""))
    if e.get("published") and not tables.missing(theirs):
        value = theirs
    if row["status"] == "unsupported":
        return [(e, None, None, "UNSUPPORTED")]
    if row["status"] not in ("ok", "partial") or tables.missing(value):
        return [(e, None, None, f"FAIL ({row['status']})")]
    ref = e["value"]
    delta = (value - ref) / ref if ref else (0.0 if value == ref else math.inf)
    worse = delta if e["lower_is_better"] else -delta
    return [(e, value, delta, "PASS" if worse <= e["tolerance"] + 1e-12 else "FAIL")]


def _num(v) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _shown(v, e: dict, unit: bool = False) -> str:
    """An entry's figure: an MFU as every MFU is shown (tables.percent), else the number and,
    where asked, its unit."""
    if e["metric"] == "mfu":
        return tables.percent(v)
    return f"{_num(v)} {e['unit']}" if unit else _num(v)


def warn_corrupt(results) -> None:
    """One line on stderr when bad record files cost repeats (the report lists them)."""
    if results.corrupt:
        print(f"warning: {len(results.corrupt)} corrupt record file(s) under {results.root}: "
              f"their repeats are marked corrupt (python -m analysis report lists them)",
              file=sys.stderr)


def cmd_compare(args) -> int:
    results = load(args.path, merge=args.merge)
    warn_corrupt(results)
    stored = str(args.reference) == STORE or str(args.reference).startswith(STORE + ":")
    data = stored_reference(args.reference, results, args.store) if stored else None
    system, entries = read_reference(args.reference, args.system, args.tolerance, data)
    table: list = []
    labels: list = []
    found, not_run = verdicts(results, entries), 0
    if str(args.reference).startswith(published.PREFIX):
        not_run = sum(v[3] == "NOT RUN" for v in found)
        found = [v for v in found if v[3] != "NOT RUN"]
        if not found:
            raise RecordError(f"no row of {args.reference} matches a point of {args.path} "
                              "(device, framework, model of full size, precision, devices, batch)")
    for e, value, delta, verdict in found:
        if e.get("label"):
            labels.append(f"[{len(labels) + 1}] {e['label']}")
        table.append([_describe(e["config"]) + (f" [{e['point']}]" if e.get("point") else "")
                      + (f" [{len(labels)}]" if e.get("label") else ""), e["metric"],
                      "-" if value is None else _shown(value, e), _shown(e["value"], e, unit=True),
                      "-" if delta is None else f"{delta:+.1%}", f"{e['tolerance']:.0%}"
                      + (" (lower is better)" if e["lower_is_better"] else ""), verdict])
    say(f"# Regression gate: {args.path} against {args.reference} (system {system})\n")
    say(tabulate(table, headers=["configuration", "metric", "value", "reference", "delta",
                                 "tolerance", "verdict"], tablefmt="github", disable_numparse=True))
    if labels:
        say("\n" + "\n".join(labels))
    notes = image_notes(results, found)
    if notes:
        say("\n" + "\n".join(notes))
    unsupported = sum(row[-1] == "UNSUPPORTED" for row in table)
    failed = sum(not row[-1].startswith("PASS") for row in table) - unsupported
    say(f"\n{len(table) - failed - unsupported} of {len(table)} within tolerance"
        + (f"; {failed} failed or missing" if failed else "")
        + (f"; {unsupported} unsupported on this machine (not compared)" if unsupported else "")
        + (f"; {not_run} published row(s) of other settings not run here" if not_run else "")
        + (f"; {data['without_baseline']} point(s) without a stored baseline (not compared)"
           if data and data.get("without_baseline") else ""))
    return 1 if failed else 0


def cmd_reference(args) -> int:
    results = load(args.path, merge=args.merge)
    warn_corrupt(results)
    ref = make_reference(results, args.tolerance, args.system)
    try:
        with open(args.out, "w") as f:
            if args.out.endswith(".json"):
                json.dump(ref, f, indent=1)
            else:
                yaml.safe_dump(ref, f, sort_keys=False, default_flow_style=None, width=100)
    except OSError as exc:
        raise RecordError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    say(f"reference: {args.out}: {len(ref['entries'])} entries, system {ref['system']!r}, "
        f"tolerance {ref['tolerance']:.0%}")
    return 0


def add_commands(sub) -> None:
    """The `compare` and `reference` subcommands of `python -m analysis`."""
    cmp = sub.add_parser("compare", help="the regression gate: figures against a reference file")
    cmp.add_argument("path", help="a sweep folder, a certification's or an archive")
    cmp.add_argument("--merge", action="store_true", help="PATH holds several sweeps: all of them")
    cmp.add_argument("--reference", required=True,
                     help="a reference file (YAML or JSON), published:NAME (analysis/published/NAME.yaml), "
                          "or store[:SWEEP] (the last good run stored before this one, or that sweep's)")
    cmp.add_argument("--system", help="the entries of this system (when the file holds several)")
    cmp.add_argument("--tolerance", type=float, default=None,
                     help="relative; replaces every entry's tolerance (default: the file's)")
    cmp.add_argument("--store", help="the results store --reference store reads (default: "
                                     "DLBENCH_STORE, else ~/.local/share/dlbench/results.sqlite)")
    ref = sub.add_parser("reference", help="a reference file from a past run")
    ref.add_argument("path", help="a sweep folder, a certification's or an archive")
    ref.add_argument("--merge", action="store_true", help="PATH holds several sweeps: all of them")
    ref.add_argument("--out", required=True, help="the file to write (.yaml, or .json)")
    ref.add_argument("--tolerance", type=float, default=0.05, help="relative (default 0.05)")
    ref.add_argument("--system", help="the system's name (default: the devices of the run)")


COMMANDS = {"compare": cmd_compare, "reference": cmd_reference}
