"""The checks of one node, run by its first rank (docs/health.md lists each, its threshold
and where it comes from). Each answers {"status": "ok" | "sick" | "skipped", "reason": ...}
and, where the allocation's median judges it (launchers/health/verdict.py), a `value`.
A check that cannot apply here says why it is skipped; it never passes silently.

NVML comes from nvidia-ml-py (`pynvml`), imported only when a check asks for it.
Standard library only otherwise, plus torch where a device is counted or multiplied on:
this runs in the health step's Python (healthchecks/rank.py).
"""
import glob
import math
import os
import subprocess
import time

from frameworks.common import environment

# The checks, by where they run: once per node, on every device, between nodes.
NVML_CHECKS = ("ecc", "rows", "throttle", "clocks", "power", "persistence")
NODE_CHECKS = ("devices", "versions", *NVML_CHECKS, "infiniband", "nccl_env", "memory", "shm",
               "governor", "site")
CHECKS = NODE_CHECKS + ("matmul", "links")
# Judged against the allocation's median (health.min_fraction): a node's `value` below it is sick.
MEDIAN_CHECKS = ("clocks", "infiniband", "memory", "shm", "matmul")

# Throttle reasons that slow a busy GPU for a fault (NVML's clocks event reason bits); idle,
# application clocks and the software power cap are normal states.
BAD_THROTTLE = {0x8: "hardware slowdown", 0x20: "software thermal slowdown",
                0x40: "hardware thermal slowdown", 0x80: "hardware power brake"}
SITE_CHECK_TIMEOUT_S = 60


class Skip(Exception):
    """The check cannot apply on this node: its message says why."""


def ok(reason=None, **facts) -> dict:
    return {"status": "ok", "reason": reason, **facts}


def sick(reason: str, **facts) -> dict:
    return {"status": "sick", "reason": reason, **facts}


def skipped(reason: str) -> dict:
    return {"status": "skipped", "reason": reason}


# ---- NVML ---------------------------------------------------------------------------------
_NVML: dict = {}


def nvml():
    """The initialised pynvml module, or Skip saying why there is none."""
    if "module" not in _NVML:
        try:
            import pynvml
        except ImportError:
            _NVML["why"] = "nvidia-ml-py is not installed in this Python: NVML checks skipped"
        else:
            try:
                pynvml.nvmlInit()
                _NVML["module"] = pynvml
            except pynvml.NVMLError as exc:
                _NVML["why"] = f"no GPU: NVML checks skipped (NVML: {exc})"
        _NVML.setdefault("module", None)
    if _NVML["module"] is None:
        raise Skip(_NVML["why"])
    return _NVML["module"]


def _handles(nv) -> list:
    count = nv.nvmlDeviceGetCount()
    if not count:
        raise Skip("no GPU: NVML checks skipped (NVML finds no device)")
    return [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# NVML's answers that a value cannot be read here, not that it is bad: the GPU lacks it, a
# container or virtual machine may not read it, the driver predates the call or retired it
UNREADABLE = ("NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound",
              "NVMLError_Deprecated")


def _unreadable(nv) -> tuple:
    return tuple(getattr(nv, name) for name in UNREADABLE if hasattr(nv, name))


def _per_device(nv, read) -> list:
    """[(index, read(handle))] of the devices where what `read` asks can be read; Skip when on
    none (UNREADABLE)."""
    out, why = [], None
    for i, h in enumerate(_handles(nv)):
        try:
            out.append((i, read(h)))
        except _unreadable(nv) as exc:
            why = why or str(exc)
            continue
    if not out:
        raise Skip(f"not readable on this node's GPUs (NVML: {why})")
    return out


def ecc(settings) -> dict:
    nv = nvml()
    errors = _per_device(nv, lambda h: nv.nvmlDeviceGetTotalEccErrors(
        h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC))
    bad = [f"GPU {i}: {n} uncorrected ECC error(s) since the driver loaded" for i, n in errors if n]
    return sick("; ".join(bad)) if bad else ok(value=0)


def rows(settings) -> dict:
    """Row remapping (A100 and newer): a pending remap or a failed one; older GPUs retire pages."""
    nv = nvml()
    bad = []
    for i, h in enumerate(_handles(nv)):
        try:
            _, uncorrected, pending, failed = nv.nvmlDeviceGetRemappedRows(h)
            if failed:
                bad.append(f"GPU {i}: a row remapping failed")
            elif pending:
                bad.append(f"GPU {i}: a row remapping is pending (the GPU needs a reset)")
            continue
        except _unreadable(nv):
            pass
        try:
            if nv.nvmlDeviceGetRetiredPagesPendingStatus(h):
                bad.append(f"GPU {i}: retired pages pending (the GPU needs a reset)")
        except _unreadable(nv):
            continue
    return sick("; ".join(bad)) if bad else ok()


def throttle(settings) -> dict:
    nv = nvml()
    read = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) \
        or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    bad = []
    for i, mask in _per_device(nv, read):
        names = [name for bit, name in BAD_THROTTLE.items() if mask & bit]
        if names:
            bad.append(f"GPU {i}: {', '.join(names)}")
    return sick("; ".join(bad)) if bad else ok()


def clocks(settings) -> dict:
    """The SM clock each GPU runs work at (its application clock, as the site set it), the
    node's slowest; the allocation's median judges it."""
    nv = nvml()
    mhz = _per_device(nv, lambda h: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM))
    slowest = min(m for _, m in mhz)
    return ok(f"SM clock {slowest} MHz", value=slowest, unit="MHz")


def power(settings) -> dict:
    nv = nvml()
    limits = _per_device(nv, lambda h: (nv.nvmlDeviceGetEnforcedPowerLimit(h),
                                        nv.nvmlDeviceGetPowerManagementDefaultLimit(h)))
    low = [f"GPU {i}: power capped at {got / 1000:.0f} W of its default {default / 1000:.0f} W"
           for i, (got, default) in limits if got < settings["min_fraction"] * default]
    return sick("; ".join(low)) if low else ok()


def persistence(settings) -> dict:
    nv = nvml()
    off = [i for i, mode in _per_device(nv, nv.nvmlDeviceGetPersistenceMode)
           if mode != nv.NVML_FEATURE_ENABLED]
    if off:
        return sick(f"persistence mode off on GPU {', '.join(map(str, off))} (the driver "
                    "unloads between jobs; every job's first CUDA call pays its start)")
    return ok()


# ---- devices and versions -------------------------------------------------------------------
def slurm_gres(host: str):
    """(count, type) of the GPUs this node's slurmd registered (gres.conf, or its NVML
    autodetection), from `scontrol show node`; None outside a Slurm job or without GPU gres."""
    if "SLURM_JOB_ID" not in os.environ:  # not under Slurm: no node record to ask for
        return None
    try:
        out = subprocess.run(["scontrol", "show", "node", host, "-o"], capture_output=True,
                             text=True, timeout=15).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return gpu_gres(out)


def gpu_gres(node_line: str):
    """(count, type or None) of `scontrol show node -o`'s Gres=gpu[:type]:N[(S:..)], or None."""
    for field in node_line.split():
        if field.startswith("Gres="):
            for gres in field[len("Gres="):].split(","):
                parts = gres.split("(")[0].split(":")
                if parts[0] == "gpu" and parts[-1].isdigit():
                    return int(parts[-1]), parts[1] if len(parts) == 3 else None
    return None


def inventory(host: str) -> dict | None:
    """The node's GPUs: {source, count, models}. NVML counts what the driver has (whatever
    CUDA_VISIBLE_DEVICES says); without it CUDA counts what the process may use; without a
    CUDA runtime the count is the one the node's slurmd registered (the test cluster's fake
    GPUs). None when the node has no GPU by any of them."""
    try:
        nv = nvml()
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        return {"source": "NVML", "count": len(handles),
                "models": [_text(nv.nvmlDeviceGetName(h)) for h in handles]}
    except Skip:
        pass
    import torch
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        return {"source": "CUDA", "count": n, "models": [torch.cuda.get_device_name(i) for i in range(n)]}
    gres = slurm_gres(host)
    if gres:
        count, kind = gres
        return {"source": "Slurm's gres of the node (no CUDA runtime here)", "count": count,
                "models": [kind] * count if kind else []}
    return None


def devices(settings, host: str) -> dict:
    """The count against the request here; the model against health.device_model here and
    against the other nodes' in the verdict."""
    inv = inventory(host)
    if inv is None:
        raise Skip("no GPU: device count and model not checked")
    want = settings["gpus_per_node"]
    facts = {"count": inv["count"], "models": inv["models"], "source": inv["source"]}
    if inv["count"] < want:
        return sick(f"{inv['count']} GPU(s), {want} requested ({inv['source']})", **facts)
    model = settings.get("device_model")
    odd = [m for m in inv["models"] if model and model.lower() not in m.lower()]
    if odd:
        return sick(f"GPU model {odd[0]!r}, not {model} (health.device_model)", **facts)
    return ok(f"{inv['count']} GPU(s) ({inv['source']})", **facts)


def versions(settings) -> dict:
    """The driver's, its CUDA's and NCCL's versions; the verdict wants them equal on every node."""
    try:
        nv = nvml()
        cuda = nv.nvmlSystemGetCudaDriverVersion_v2()
        found: dict[str, str | None] = {"driver": _text(nv.nvmlSystemGetDriverVersion()),
                 "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}"}
    except Skip:
        found = {"driver": environment.nvidia_driver(), "cuda": None}
    import torch
    if torch.cuda.is_available():
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        found["cuda"] = found["cuda"] or torch.version.cuda
    if not any(found.values()):
        raise Skip("no GPU: no driver, CUDA or NCCL version to compare")
    return ok(", ".join(f"{k} {v}" for k, v in found.items() if v), versions=found)


# ---- network --------------------------------------------------------------------------------
def _rate_gbps(rate) -> float | None:
    """'200 Gb/sec (4X HDR)' -> 200.0; None where unreadable."""
    try:
        return float(str(rate).split()[0])
    except (ValueError, IndexError):
        return None


def infiniband(settings, root="/sys/class/infiniband") -> dict:
    ports = environment.infiniband_ports(root)
    if not ports:
        raise Skip(f"no InfiniBand device in {root}")
    down = [f"{p['device']} port {p['port']}: {p['state']}" for p in ports
            if not str(p["state"]).endswith("ACTIVE")]
    rates = [r for r in (_rate_gbps(p["rate"]) for p in ports) if r is not None]
    facts = {"ports": ports, **({"value": min(rates), "unit": "Gb/s"} if rates else {})}
    if down:
        return sick("; ".join(down), **facts)
    return ok(f"{len(ports)} port(s) active", **facts)


def nccl_env(settings) -> dict:
    """The site's NCCL_* settings (cluster.env) as this rank received them."""
    want = settings.get("nccl_env") or {}
    if not want:
        raise Skip("the site sets no NCCL_* variable (cluster.env)")
    bad = []
    for key, value in sorted(want.items()):
        got = os.environ.get(key)
        if got is None:
            bad.append(f"{key} missing")
        elif got != str(value):
            bad.append(f"{key}={got}, the site sets {value}")
    return sick("; ".join(bad)) if bad else ok(f"{len(want)} NCCL_* setting(s) as the site sets them")


# ---- host -----------------------------------------------------------------------------------
def memory(settings, meminfo="/proc/meminfo") -> dict:
    facts = {}
    try:
        with open(meminfo) as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemAvailable", "MemTotal"):
                    facts[key] = int(rest.split()[0]) * 1024
    except OSError as exc:
        raise Skip(f"cannot read {meminfo}: {exc.strerror or exc}") from None
    if "MemAvailable" not in facts:
        raise Skip(f"{meminfo} has no MemAvailable")
    return ok(f"{facts['MemAvailable'] / 2**30:.1f} GiB available", value=facts["MemAvailable"],
              unit="bytes", total=facts.get("MemTotal"))


def shm(settings, path="/dev/shm") -> dict:
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return sick(f"no {path} ({exc.strerror or exc}): NCCL and data loaders need it")
    free = st.f_bavail * st.f_frsize
    return ok(f"{free / 2**30:.1f} GiB free in {path}", value=free, unit="bytes")


def governor(settings, pattern="/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor") -> dict:
    want = settings.get("cpu_governor") or "performance"
    found = {}
    for path in glob.glob(pattern):
        try:
            with open(path) as f:
                found[path] = f.read().strip()
        except OSError:
            continue
    if not found:
        raise Skip("no cpufreq governor in /sys (a virtual machine, or no cpufreq driver)")
    other = sorted({g for g in found.values() if g != want})
    if other:
        n = sum(g != want for g in found.values())
        return sick(f"{n} of {len(found)} CPUs run {', '.join(map(repr, other))}, not {want!r}")
    return ok(f"{len(found)} CPUs run {want!r}")


def site(settings) -> dict:
    """The site's own checks: each script runs once on the node; a non-zero exit, or no
    answer within SITE_CHECK_TIMEOUT_S, marks the node sick with the script's last line."""
    scripts = settings.get("site_checks") or []
    if not scripts:
        raise Skip("no site check configured (health.site_checks)")
    bad = []
    for script in scripts:
        try:
            r = subprocess.run([str(script)], capture_output=True, text=True,
                               timeout=SITE_CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            bad.append(f"{script}: no answer within {SITE_CHECK_TIMEOUT_S} s")
            continue
        except OSError as exc:
            bad.append(f"{script}: cannot run it ({exc.strerror or exc})")
            continue
        if r.returncode:
            last = ((r.stdout + r.stderr).strip().splitlines() or [""])[-1][:200]
            bad.append(f"{script} exited {r.returncode}" + (f": {last}" if last else ""))
    return sick("; ".join(bad)) if bad else ok(f"{len(scripts)} site check(s) passed")


# ---- compute: every device ----------------------------------------------------------------
def matmul(settings, device: str) -> dict:
    """GFLOP/s of a square fp32 matrix multiply on this rank's device, the best of the
    repetitions in health.matmul_s seconds (at least 3): the allocation's median judges it."""
    import torch
    n = int(settings.get("matmul_n") or (8192 if device != "cpu" else 512))
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    (a @ b).sum().item()  # the first call pays the library's start
    best, reps, until = math.inf, 0, time.perf_counter() + float(settings.get("matmul_s") or 0.5)
    while reps < 3 or time.perf_counter() < until:
        sync()
        t0 = time.perf_counter()
        a @ b
        sync()
        took = time.perf_counter() - t0
        best = min(best, took)
        reps += 1
    gflops = 2 * n ** 3 / best / 1e9
    return ok(f"{gflops:.1f} GFLOP/s ({n}x{n} fp32 on {device})", value=gflops, unit="GFLOP/s")


def run_node(settings, host: str) -> dict:
    """Every node check asked for (settings["checks"]) -> name -> result."""
    out = {}
    for name in NODE_CHECKS:
        if name not in settings["checks"]:
            out[name] = skipped("not asked (health.checks)")
            continue
        try:
            fn = globals()[name]
            out[name] = fn(settings, host) if name == "devices" else fn(settings)
        except Skip as exc:
            out[name] = skipped(str(exc))
        except Exception as exc:  # a check that breaks says so: it does not pass
            out[name] = sick(f"the check failed: {type(exc).__name__}: {exc}")
    return out
