"""The timed loop every worker runs: the one place the measuring method lives.

A framework declares its sessions in its adapter (frameworks/registry.py); each is a
Session (frameworks/common/session.py), built as `session(spec, dist)` from the typed run
spec (contract/spec.py).
The harness runs `warmup_steps` untimed-for-throughput steps, synchronizes the
device and all ranks, then runs `measure_steps` steps inside the timed window,
synchronizing again only at the window's far edge. Per-step times come from
the session's StepTimer (host clock on CPU, device events on a GPU), read
after the window so that timing never stalls the pipeline; beside a device's step ends, the
host's end of enqueuing each step, and once after warm-up whether a step waits on the device
(docs/anatomy.md: how far the device trails the host). Losses are kept as
handles and read after the window for the same reason; a non-finite one fails
the run. Standard library only: this runs in the framework's Python.
"""
import argparse
import math
import os
import socket
import sys
import time

from . import capability, datafiles, distenv, environment, heartbeat, memory, nvml_energy, sigterm
from .session import Session
from frameworks import registry
from contract import nccl_net, paths, records, versions
from contract import spec as run_spec
from . import profile  # profile=true: a trace after the timed window (common/profile.py)
from contract.statuses import Cancelled  # SIGTERM's exception (harness.Cancelled to the adapters)
from contract.statuses import StorageEnding


def run_steps(session: Session, spec: run_spec.RunSpec, record: records.Record, origin: float) -> None:
    # the samples this rank counts per step: its batch, or its share of the global batch
    # where ranks split one model (a layout's, frameworks/pytorch/lm_session.py)
    batch = spec.batch_size if session.samples_per_step is None else session.samples_per_step
    steps = record["steps"]

    def check(handles, first, phase):
        for i, h in enumerate(handles):
            loss = session.loss_value(h)
            steps[first + i]["loss"] = loss
            if not math.isfinite(loss):
                raise FloatingPointError(f"non-finite loss {loss} at {phase} step {first + i}")

    handles = []
    beat = heartbeat.start(spec, record["rank"])  # rank 0's progress file (common/heartbeat.py)
    for i in range(spec.warmup_steps):
        t0 = time.perf_counter()
        handles.append(session.step())
        session.sync()  # warm-up is not in the window; per-step sync is harmless here
        beat.done += 1
        steps.append({"step": i, "phase": "warmup", "start": t0 - origin,
                      "end": time.perf_counter() - origin, "samples": batch, "loss": None})
    check(handles, 0, "warmup")
    probe = session.step_syncs()   # untimed: does a step wait on the device? (docs/anatomy.md)
    if probe is not None:
        record["step_sync"] = probe

    meter = nvml_energy.Meter(session)  # NVML opened before the window; read at its edges
    session.sync()
    session.barrier()
    window_peak = session.reset_peak_device_bytes()  # the peak of the timed steps, not the build's
    if window_peak:
        record["memory"]["peak_device_scope"] = "window"
    meter.begin()  # the counter, before the timer's anchor: its read is in no step
    beat.phase = "timed"
    timer = session.timer()
    first = len(steps)
    handles, enqueued = [], []
    w0 = time.perf_counter()
    for i in range(spec.measure_steps):
        timer.begin(i)
        handles.append(session.step())
        enqueued.append(time.perf_counter_ns())   # the host's end of enqueuing it: no sync
        timer.end(i)
        beat.done += 1  # an int; the heartbeat's thread reads it
    session.sync()
    w1 = time.perf_counter()
    beat.stop()
    record["energy"] = meter.end(w1 - w0)
    record["window"] = {"start": w0 - origin, "end": w1 - origin}
    if window_peak:   # read now: after_window's untimed steps (a trace, a bubble) are not in it
        record["memory"]["peak_device_bytes"] = session.peak_device_bytes()
    device_ends = getattr(timer, "device_ends", False)
    for i, (s, e) in enumerate(timer.read(w0, origin)):
        steps.append({"step": first + i, "phase": "measure", "start": s, "end": e,
                      "samples": batch, "loss": None})
        if device_ends:   # beside the device's end, the host's: how far one trails the other
            steps[-1]["enqueued"] = enqueued[i] / 1e9 - origin
    check(handles, first, "measure")
    record_parameter_checksum(session, record)
    session.after_window(record)
    profile.after_window(session, spec, record, record["rank"])  # profile=true: a trace, untimed


CHECKSUM_TIMEOUT_S = 60


def record_parameter_checksum(session: Session, record: records.Record, seconds: float | None = None) -> None:
    """record["parameter_checksum"] from the session's `parameter_checksum()`, asked in a
    daemon thread waited on for at most `seconds` (CHECKSUM_TIMEOUT_S): an adapter's
    exception or hang costs this field (null, with the reason in
    `parameter_checksum_error`), never the record."""
    import threading
    seconds = CHECKSUM_TIMEOUT_S if seconds is None else seconds
    box = {}

    def target():
        try:
            box["value"] = session.parameter_checksum()
        except BaseException as exc:  # noqa: BLE001  (reported in the record)
            box["error"] = f"{type(exc).__name__}: {exc}"

    t = threading.Thread(target=target, name="dlbench-parameter-checksum", daemon=True)
    t.start()
    t.join(seconds)
    value = box.get("value")
    if t.is_alive():
        error = f"TimeoutError: parameter_checksum() still running after {seconds} s"
    elif "error" in box:
        error = box["error"]
    elif value is None or isinstance(value, str):
        error = None
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        error = f"TypeError: parameter_checksum() returned a {type(value).__name__}"
    elif not math.isfinite(value):
        error = f"ValueError: parameter_checksum() returned {value}"
    else:
        error, value = None, value if isinstance(value, int) else float(value)
    if error is None:
        record["parameter_checksum"] = value
    else:
        record["parameter_checksum"] = None
        record["parameter_checksum_error"] = error


def run(adapter, spec, dist, host=None):
    """Build the session and run the loop; return the finished record and the session
    (None if it was never built), which the caller closes after saving the record.

    `adapter`: the framework's (frameworks/registry.py), None for the one the registry holds
    for spec.framework, looked up here so that a framework that cannot even import still
    leaves a record that says why."""
    origin = time.perf_counter()
    record = records.new_record(spec.as_dict(), dist, host or socket.gethostname(), time.time())
    sigterm.pending(record, record_path(spec, dist))  # what SIGTERM saves if a step holds on
    record["parameter_checksum"] = None  # run_steps fills it in once the loop has ended ok
    record["mode"] = spec.mode  # eager, jit, graph, ... (contract/modes.py)
    record["data"] = datafiles.settings(spec, dist)  # source, backend, workers (docs/data.md)
    # the image this rank ran in, as the submitting side named and hashed it (docs/containers.md)
    record["container"] = None if spec.container is None else spec.container.as_dict()
    session = limits = oom_rule = None
    nccl_before = {}  # the NCCL_DEBUG* values before the run's, put back at its end
    try:
        record["environment"] = environment.capture(topology=dist.local_rank == 0)
        if os.environ.get("DLBENCH_FAIL_RANK") == str(dist.rank):  # fault injection for tests
            raise RuntimeError(f"injected failure on rank {dist.rank} (DLBENCH_FAIL_RANK)")
        adapter = adapter or registry.get(spec.framework)
        # its releases, asked before the framework's import: one too old for the point is
        # `unsupported`, naming both versions (contract/versions.py)
        found = record["framework"]["releases"] = versions.found(adapter.releases)
        versions.check(adapter.releases, spec, dist.world_size, found)
        # NCCL's INIT and NET lines to this rank's file, before the framework starts NCCL: the
        # network it chose, read back below (contract/nccl_net.py)
        asked = nccl_net.debug_env(os.environ, spec.record_dir, dist.rank)
        nccl_before = {k: os.environ.get(k) for k in asked}
        os.environ.update(asked)
        make = _constructor(adapter, spec, dist, record)
        oom_rule = adapter.oom_rule  # its OOM rule, asked on failure (also while building)
        limits = memory.limit_memory(spec.memory_limit_mb)  # after the framework's import
        session = make(spec, dist)
        sigterm.reclaim()  # a framework may have taken SIGTERM for itself
        sigterm.doing("the step in progress")
        record["framework"]["version"] = session.framework_version
        record["environment"].update(session.environment())
        parallel = session.parallel_record()
        if parallel is not None:
            record["parallel"] = parallel
        if type(session).run_bench is Session.run_bench:   # the default: a training bench
            run_steps(session, spec, record, origin)
        else:   # a bench with its own loop (bench=comm, bench=checkpoint)
            session.run_bench(spec, record, origin)
        record["data"].update(session.data_record())
        record["status"] = "ok"
    except BaseException as exc:  # every ending, even KeyboardInterrupt, leaves a record
        record["error"] = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, Cancelled) or sigterm.received():  # the stop's, however it surfaced
            record["status"] = "cancelled"
        elif isinstance(exc, capability.Unsupported):
            record["status"] = "unsupported"
            record["error"] = str(exc)  # the one line that says what is missing
        elif isinstance(exc, StorageEnding):  # a checkpoint's storage: unwritable, disk_full, ...
            record["status"] = exc.status
        elif _is_oom(oom_rule, exc):
            record["status"] = "oom"
        else:
            record["status"] = "failed"
    finally:
        memory.restore(limits)
        peaks = record["memory"]
        if session is not None and peaks["peak_device_bytes"] is None:
            peaks["peak_device_bytes"] = _safe(session.peak_device_bytes)
            if peaks["peak_device_bytes"] is not None:   # the window's up to a failure in it,
                peaks.setdefault("peak_device_scope", "process")   # else the process's
        record["memory"]["peak_host_bytes"] = environment.peak_host_bytes()
        nccl = _safe(lambda: nccl_net.read(spec.record_dir, dist.rank))
        if nccl:  # an NCCL point: the network and version NCCL chose, by its own lines
            record["nccl"] = nccl
        for key, value in nccl_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        record["ended_unix"] = time.time()
    return record, session


def _constructor(adapter, spec, dist, record):
    """The session's constructor: the spec's bench's (importing the framework), or its
    data=files session; record["data"] checked first (data=files where the adapter names
    its loader backends, else `unsupported`)."""
    bench = adapter.bench(spec.bench)
    make = adapter.load(bench.session)
    record["data"] = datafiles.require(spec, spec.framework, adapter.data_backends, dist)
    if bench.files is not None and datafiles.reads_files(spec):
        make = adapter.load(bench.files)
    return make


def _is_oom(oom_rule, exc) -> bool:
    """The framework's OOM rule, else (none declared, or the framework never imported) the
    base one: a MemoryError."""
    try:
        rule = oom_rule() if oom_rule is not None else None
    except Exception:  # noqa: BLE001  (its module does not import: not an OOM of its own)
        rule = None
    return (rule or Session.is_oom)(exc)


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def main(argv=None, adapter=None) -> int:
    """`python -m frameworks --spec PATH`: one rank of one repeat, any framework (`adapter`:
    the spec's framework's from the registry when None)."""
    parser = argparse.ArgumentParser(description="Run one rank of one benchmark repeat.")
    parser.add_argument("--spec", required=True, help="run-spec JSON written by the launcher")
    args = parser.parse_args(argv)
    sigterm.install()  # SIGTERM: `cancelled`, and an end within sigterm.GIVE_UP_S
    try:
        spec = run_spec.read(args.spec)
        dist = distenv.from_env()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"worker: {exc}", file=sys.stderr)
        return 2
    record, session = run(adapter, spec, dist)
    sigterm.save(record_path(spec, dist), record)  # saved before teardown, which can hang
    if record["status"] != "ok":
        print(f"worker rank {dist.rank}: {record['status']}: {record['error']}", file=sys.stderr)
    code = 0 if record["status"] == "ok" else 1
    if sigterm.received():
        sigterm.leave(code)   # stopped: no teardown, whose collective would wait for stopped peers
    if session is not None:
        close_within(session, CLOSE_TIMEOUT_S, code)
    return code


def record_path(spec, dist) -> str:
    return os.path.join(spec.record_dir, paths.rank_record_name(dist.rank))


CLOSE_TIMEOUT_S = 60


def close_within(session, seconds, code) -> None:
    """Release the session, but never wait on a teardown that deadlocks (seen with gloo)."""
    import threading
    t = threading.Thread(target=_safe, args=(session.close,), daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        print(f"worker: teardown still running after {seconds} s; exiting", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # the record is saved
