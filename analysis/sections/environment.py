"""The report's Environment section (report.html folds it): one short paragraph per
distinct system.

A system is what the rank records say a host ran on (frameworks/common/environment.py and
the adapter's environment()): device x count, driver / CUDA / cuDNN / NCCL, CPU, memory,
interconnect (`nvidia-smi topo -m` of local rank 0, InfiniBand ports). Hosts with the
same facts are one system. Where points ran in container images, each image follows, with its
points (analysis/read/images.py). From the first recorded repeat of each point, as analysis.load
read it (Results.environments; this module reads no file).
"""
import re

from analysis import tables
from analysis.read import images

VERSIONS = (("nvidia_driver", "driver"), ("cuda", "CUDA"), ("cudnn", "cuDNN"), ("nccl", "NCCL"))


def _records(results):
    """One rank's {host, framework, environment} per (point, rank) of each point's first
    repeat with any readable rank record."""
    first = {}
    for e in results.environments:
        key = (e["sweep"], e["point"])
        first[key] = min(first.get(key, e["repeat"]), e["repeat"])
    by_point = {}
    for e in results.environments:
        if first[(e["sweep"], e["point"])] == e["repeat"]:
            by_point.setdefault((e["sweep"], e["point"]), []).append(e)
    for p in results.points.itertuples():
        yield from by_point.pop((p.sweep, p.point), [])


def topology_summary(text):
    """`nvidia-smi topo -m` in a few words: NVLink (NV#) or PCIe between GPUs, and NICs."""
    if not text:
        return None
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    head = lines[0]
    gpu_cols = [i for i, h in enumerate(head) if re.fullmatch(r"GPU\d+", h)]
    links, nics = set(), [h for h in head if re.fullmatch(r"(mlx|NIC|ib|bnxt|hfi)\w*", h)]
    for row in lines[1:]:
        if not row or not re.fullmatch(r"GPU\d+", row[0]):
            continue
        for i in gpu_cols:
            if i + 1 < len(row) and row[i + 1] != "X":
                links.add(row[i + 1])
    if not gpu_cols:
        return None
    nv = sorted((int(link[2:]) for link in links if re.fullmatch(r"NV\d+", link)))
    if nv:
        gpu = f"NVLink between GPUs (NV{nv[0]}" + (f"-NV{nv[-1]}" if nv[-1] != nv[0] else "") + ")"
    elif links:
        gpu = f"PCIe between GPUs ({'/'.join(sorted(links))})"
    else:
        gpu = "1 GPU"
    return gpu + (f"; NICs in topology: {', '.join(nics)}" if nics else "")


def infiniband_summary(env):
    ports = env.get("infiniband_ports") or []
    if ports:
        kinds = sorted({f"{p.get('link_layer') or '?'} {p.get('rate') or '?'} {p.get('state') or '?'}"
                        for p in ports})
        return f"{len(ports)} port(s) on {', '.join(sorted({p['device'] for p in ports}))}: " \
               + "; ".join(kinds)
    if env.get("infiniband"):
        return ", ".join(env["infiniband"])
    return None


def system_of(rec) -> dict:
    env = rec.get("environment") or {}
    gpus = env.get("gpus") or []
    device = env.get("device") or (gpus[0]["name"] if gpus else None)
    count = env.get("device_count") or (len(gpus) or None)
    return {"device": (f"{device} x {count}" if count else device) if device else "unknown device",
            "versions": ", ".join(f"{label} {env[k]}" for k, label in VERSIONS if env.get(k)),
            "cpu": f"{env.get('cpu') or 'unknown CPU'} ({env.get('cpu_count') or '?'} cores"
                   + (f", {tables.gib(env['memory_bytes']):.0f} GiB)" if env.get("memory_bytes") else ")"),
            "topology": topology_summary(env.get("gpu_topology")),
            "infiniband": infiniband_summary(env)}


def environment_block(results) -> str:
    systems: dict = {}   # facts (without topology, which only local rank 0 has) -> details
    for rec in _records(results):
        facts = system_of(rec)
        key = (facts["device"], facts["versions"], facts["cpu"], facts["infiniband"])
        s = systems.setdefault(key, {"facts": facts, "hosts": set(), "topology": set(),
                                     "frameworks": set()})
        s["hosts"].add(rec.get("host") or "?")
        if facts["topology"]:
            s["topology"].add(facts["topology"])
        fw = rec.get("framework") or {}
        if fw.get("name"):
            s["frameworks"].add(f"{fw['name']} {fw.get('version') or '?'}")
    if not systems:
        return "## Environment\nno rank records to tell"
    lines = ["## Environment"]
    for n, s in enumerate(systems.values(), 1):
        f = s["facts"]
        hosts = sorted(s["hosts"])
        shown = ", ".join(hosts[:8]) + (f" and {len(hosts) - 8} more" if len(hosts) > 8 else "")
        inter = "; ".join(sorted(s["topology"])) or "no GPU topology"
        inter += f"; InfiniBand {f['infiniband']}" if f["infiniband"] else "; no InfiniBand"
        lines += [f"- system {n}: {len(hosts)} host(s): {shown}",
                  f"  devices: {f['device']} per host" + (f"; {f['versions']}" if f["versions"] else ""),
                  f"  CPU: {f['cpu']}",
                  f"  interconnect: {inter}",
                  f"  frameworks: {', '.join(sorted(s['frameworks'])) or 'unknown'}"]
    return "\n".join(lines + images.environment_lines(results))
