"""What the results store keeps of a sweep: `Results` -> one row per sweep and per point.

Each point's row holds everything needed to set it beside another point: what ran
(framework and version, model and its settings, precision, layout, nodes x devices, batch,
mode, the method's steps and repeats, launcher, device, image and digest where the point ran in
one, hosts), when and from which suite commit, its Slurm jobs, and its figures (the method's,
analysis/figures/method.py; and analysis.figures.metrics' row, which the regression gate's stored
baseline reads: analysis/gate/compare.py). A function of what analysis.load read, and of the
points' slurm.json (the job ids), which load does not read.

A sweep is known by its key, `<folder name>@<its first point's creation time>`: the same
in its folder, in its archive and wherever the folder was moved, so that adding it again
changes nothing (analysis/store/database.py compares the rows' fingerprint). A certification
(certify/: its verdict.json) is one row more, known the same way (`certifications`).
"""
import hashlib
import json
import math
import os
from collections.abc import Mapping
from typing import Any

from analysis.figures.metrics import metrics
from analysis.read.results import Results
from contract import paths, secrets

# A row of the store (a sweep's, a point's, a certification's) and a point.json or rank record
# as read: JSON, its values of every kind, so Any.
Row = dict[str, Any]
Folders = Mapping[str, str]   # sweep label -> the folder its files are in

# the points table's columns taken as they are from analysis.load's points
FROM_POINTS = ("bench", "framework", "model", "model_size", "precision", "amp_dtype", "mode",
               "compile", "batch_size", "nodes", "gpus_per_node", "devices", "repeats",
               "n_ok", "n_recorded", "status", "error", "marks", "device", "throughput",
               "tp_min", "tp_max", "tp_cv", "ci_lo", "ci_hi", "speedup", "efficiency",
               "step_p50", "step_p90", "step_p99", "straggler", "drift", "peak_device_bytes",
               "tflops_per_device", "peak_tflops", "mfu")
FROM_METRICS = ("latency_ms", "tokens_per_s", "peak_memory_bytes", "layout")


def plain(value: object) -> Any:   # any JSON value, as `value` was
    """A value as JSON and SQL take it: numpy scalars as Python's, NaN as None."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def sweep_name(sweep: object) -> str:
    return os.path.basename(os.path.normpath(str(sweep)))


def sweep_key(name: str, created: float | None, where: str) -> str:
    """`<name>@<created>`; a sweep whose points have no creation time (written by hand, or by
    an early suite) is known by `where` it was read from."""
    return f"{name}@{created:.3f}" if created is not None else f"{name}@{where}"


def _image(point: Row, envs: list[Row]) -> tuple[str | None, str | None, str | None]:
    """(image, digest, runtime): what the ranks recorded (the record's `container`: its
    reference, digest and runtime, analysis/read/images.py), else the image the point was
    configured with (framework.container or the site's), without a digest."""
    for e in envs:
        box = e.get("container")
        if isinstance(box, dict) and box.get("image"):
            return box.get("image"), box.get("digest"), box.get("runtime")
    framework = point.get("framework") or {}
    cluster = point.get("cluster") or {}
    return (framework.get("container") or (cluster.get("containers") or {}).get(framework.get("name")),
            None, cluster.get("container_runtime"))


def _jobs(folder: str, point: str) -> list[tuple[str, bool]]:
    """[(job id, current)] from the point's slurm.json: its job, then the jobs before a requeue."""
    try:
        with open(os.path.join(paths.point_dir(folder, point), paths.SLURM_FILE)) as f:
            rec = json.load(f)
        out = [(str(rec["job_id"]), True)]
        return out + [(str(j), False) for j in rec.get("previous_jobs") or ()]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def sweep_keys(results: Results, folders: Folders | None = None) -> dict[str, str]:
    """sweep as shown -> its key, for every sweep in `results`."""
    folders = folders or {}
    created: dict[str, list[float]] = {}
    for (sweep, _), point in results.manifests.items():
        t = point.get("created_unix")
        created.setdefault(str(sweep), [])
        if t is not None:
            created[str(sweep)].append(t)
    return {s: sweep_key(sweep_name(folders.get(s, s)), min(t) if t else None, os.path.abspath(s))
            for s, t in created.items()}


def sweeps(results: Results, folders: Folders | None = None) -> list[Row]:
    """[{sweep row, "points": [point rows with "jobs"]}] of every sweep in `results`.
    `folders`: sweep label -> the folder its files are in (an archive's, unpacked), where the
    label is not one."""
    folders = folders or {}
    envs: dict[tuple[str, str], list[Row]] = {}
    for e in results.environments:
        envs.setdefault((str(e["sweep"]), e["point"]), []).append(e)
    runs: dict[tuple[str, str], list[Any]] = {}   # pandas' itertuples rows: named tuples of any
    for r in results.runs.itertuples() if len(results.runs) else ():
        runs.setdefault((str(r.sweep), r.point), []).append(r)
    figures = {(str(m["sweep"]), m["point"]): m for m in metrics(results).to_dict("records")}
    out: dict[str, list[Row]] = {}
    for p in results.points.to_dict("records"):
        sweep = str(p["sweep"])
        key = (sweep, p["point"])
        point = results.manifest(sweep, p["point"])
        mine = runs.get(key, [])
        image, digest, runtime = _image(point, envs.get(key, []))
        fig = plain(figures.get(key, {}))
        lay = point.get("parallel") if isinstance(point.get("parallel"), dict) else None
        row = {c: plain(p.get(c)) for c in FROM_POINTS}
        row.update({c: fig.get(c) for c in FROM_METRICS})
        row.update(
            point=p["point"], case_name=point.get("case"),
            framework_version=",".join(sorted({str(r.framework_version) for r in mine
                                               if isinstance(getattr(r, "framework_version", None), str)})) or None,
            hosts=",".join(sorted({h for r in mine if isinstance(getattr(r, "hosts", None), str)
                                   for h in r.hosts.split(",")})) or None,
            launcher=(point.get("launcher") or {}).get("name"),
            warmup_steps=point.get("warmup_steps"), measure_steps=point.get("measure_steps"),
            image=image, image_digest=digest, image_runtime=runtime if image else None,
            suite_commit=point.get("suite_commit"),
            created_unix=point.get("created_unix"), model_settings=plain(point.get("model")),
            parallel=plain(lay), figures={k: v for k, v in fig.items() if k != "sweep"},
            jobs=_jobs(folders.get(sweep, sweep), p["point"]))
        out.setdefault(sweep, []).append(secrets.masked(row))   # an old sweep's text: masked
    made: list[Row] = []
    keys = sweep_keys(results, folders)
    for sweep, rows in out.items():
        created = [r["created_unix"] for r in rows if r["created_unix"] is not None]
        commits = sorted({r["suite_commit"] for r in rows if r["suite_commit"]})
        name = sweep_name(folders.get(sweep, sweep))   # an archive's: its folder's name
        sweep_row = {"key": keys[sweep], "name": name,
                     "created_unix": min(created) if created else None,
                     "suite_commit": ",".join(commits) or None, "points": len(rows)}
        sweep_row["fingerprint"] = hashlib.sha256(json.dumps(
            [sweep_row, rows], sort_keys=True, default=str).encode()).hexdigest()
        made.append({**sweep_row, "label": sweep, "rows": rows})
    return made


CERTIFICATION_COUNTS = {"passed": "PASS", "failed": "FAIL", "measured": "MEASURED",
                        "not_run": "NOT RUN"}


def certifications(results: Results, folders: Folders | None = None) -> list[Row]:
    """[certification row] of every certification in `results` (its verdict.json, certify/):
    its key (`<folder name>@<creation time>`, as a sweep's), suite, date, verdict, baseline,
    threshold, system, counts, health gate, item rows and the keys of its item sweeps (the
    sweeps in its folder), with its `label` (its folder as shown) and `fingerprint`."""
    keys = sweep_keys(results, folders)
    out: list[Row] = []
    for v in results.certifications:
        label = os.path.normpath(str(v["folder"]))
        system, counts = v.get("system") or {}, v.get("counts") or {}
        base = v.get("baseline") or {}
        health = v.get("health") or {}
        row: Row = {"key": sweep_key(v.get("name") or sweep_name(label), v.get("created_unix"), label),
               "name": v.get("name") or sweep_name(label), "suite": v.get("suite"),
               "created_unix": v.get("created_unix"), "suite_commit": v.get("suite_commit"),
               "verdict": v.get("verdict"), "exit_code": v.get("exit_code"),
               "baseline": " ".join(str(x) for x in (base.get("kind"), base.get("name")) if x),
               "threshold": v.get("threshold"),
               **{k: system.get(k) for k in ("nodes", "gpus_per_node", "launcher", "cluster")},
               **{col: counts.get(word, 0) for col, word in CERTIFICATION_COUNTS.items()},
               "health": plain({k: health.get(k) for k in ("ok", "hosts", "sick", "slow_links",
                                                           "error")}),
               "items": plain(v.get("items") or []),
               "sweeps": sorted(k for s, k in keys.items()
                                if os.path.dirname(os.path.normpath(s)) == label)}
        row["fingerprint"] = hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()
        out.append({**row, "label": label})
    return out
