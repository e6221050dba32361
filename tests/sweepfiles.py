"""Builds sweep folders by hand, through the suite's own writers, for analysis tests."""
import os

from contract import paths, records, statuses
from frameworks.common.distenv import DistEnv


def write_point(sweep, name, *, framework="pytorch", model="resnet50", precision="fp32",
                batch_size=8, nodes=1, gpus_per_node=1, repeats=3, compile=False, size="tiny",
                settings=None, amp_dtype=None, config=None):
    """A point.json; `settings`: the model's own (layers, hidden, ...), `config`: the
    resolved config's keys the analysis reads (peak_tflops)."""
    pdir = paths.point_dir(sweep, name)
    os.makedirs(pdir, exist_ok=True)
    point = {"schema": paths.POINT_SCHEMA, "version": paths.SCHEMA_VERSION, "point": name,
             "num": 0, "dir": pdir, "bench": "train", "framework": {"name": framework},
             "precision": precision, "model": {"name": model, "size": size, **(settings or {})},
             "amp_dtype": amp_dtype,
             "compile": compile,
             "batch_size": batch_size, "nodes": nodes, "gpus_per_node": gpus_per_node,
             "world_size": nodes * gpus_per_node, "repeats": repeats}
    if config is not None:
        point["config"] = dict(config)
    records.write_json_atomic(os.path.join(pdir, paths.POINT_FILE), point)
    return point


def write_repeat(point, repeat, windows, *, steps=10, status="ok", error=None, run_json=True,
                 device="cpu", step_times=None, samples=None, fields=None):
    """One repeat whose rank r timed `steps` steps of the point's batch in windows[r] seconds,
    steps of equal length; or, with `step_times` (one list of step durations per rank), the
    steps of those durations, back to back, each rank's window their sum (windows: None).
    `samples(rank)`: the samples a rank counts a step (default the point's batch);
    `fields(rank)`: more of a rank's record (a layout's `parallel`, a pipeline's bubble)."""
    rdir = paths.repeat_dir(point["dir"], repeat)
    os.makedirs(rdir, exist_ok=True)
    if step_times is not None:
        windows = [sum(t) for t in step_times]
    world = len(windows)
    ranks = {}
    for rank, window in enumerate(windows):
        dist = DistEnv(rank, world, rank % point["gpus_per_node"], point["gpus_per_node"], "h", 1)
        spec = {"point": point["point"], "repeat": repeat, "framework": point["framework"]["name"]}
        rec = records.new_record(spec, dist, f"node{rank // point['gpus_per_node'] + 1}", 1e9)
        rec.update(status=status, error=error, window={"start": 1.0, "end": 1.0 + window})
        rec["framework"]["version"] = "9.9"
        rec["environment"] = {"device": device}
        if step_times is None:
            dt = window / steps
            edges = [1.0 + i * dt for i in range(steps + 1)]
        else:
            edges = [1.0]
            for t in step_times[rank]:
                edges.append(edges[-1] + t)
        n = point["batch_size"] if samples is None else samples(rank)
        rec["steps"] = [{"step": 0, "phase": "warmup", "start": 0.0, "end": 1.0,
                         "samples": n, "loss": 1.0}]
        rec["steps"] += [{"step": i + 1, "phase": "measure", "start": edges[i],
                          "end": edges[i + 1], "samples": n, "loss": 1.0}
                         for i in range(len(edges) - 1)]
        rec.update(fields(rank) if fields is not None else {})
        records.write_json_atomic(os.path.join(rdir, paths.rank_record_name(rank)), rec)
        ranks[rank] = rec
    if run_json:
        st, err = statuses.run_status(ranks, world)
        records.write_json_atomic(os.path.join(rdir, paths.RUN_FILE), {
            "schema": paths.RUN_SCHEMA, "version": paths.SCHEMA_VERSION, "point": point["point"],
            "repeat": repeat, "status": st, "error": err, "world_size": world,
            "exit_codes": [0] * world})
    return rdir


def slurm_live(p, state=None, reason=None):
    """The Slurm launcher's Live of a point (launchers/backends/slurm/watch.py) whose job Slurm
    says is `state` (None: forgotten): its slurm.json as `p["slurm"]` holds it, else its folder's."""
    from launchers.backends.slurm import watch
    rec = p.get("slurm") or records.read_json(os.path.join(p["dir"], paths.SLURM_FILE))
    return watch.live_of(rec, {"state": state, "reason": reason})
