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
    for rank in results.environments:
        key = (rank["sweep"], rank["point"])
        first[key] = min(first.get(key, rank["repeat"]), rank["repeat"])
    by_point = {}
    for rank in results.environments:
        if first[(rank["sweep"], rank["point"])] == rank["repeat"]:
            by_point.setdefault((rank["sweep"], rank["point"]), []).append(rank)
    for point in results.points.itertuples():
        yield from by_point.pop((point.sweep, point.point), [])


def topology_summary(text):
    """`nvidia-smi topo -m` in a few words: NVLink (NV#) or PCIe between GPUs, and NICs."""
    if not text:
        return None
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    head = lines[0]
    gpu_cols = [col for col, name in enumerate(head) if re.fullmatch(r"GPU\d+", name)]
    links, nics = set(), [name for name in head if re.fullmatch(r"(mlx|NIC|ib|bnxt|hfi)\w*", name)]
    for row in lines[1:]:
        if not row or not re.fullmatch(r"GPU\d+", row[0]):
            continue
        for col in gpu_cols:   # a row starts with its GPU's name: the header's column col is its col + 1
            if col + 1 < len(row) and row[col + 1] != "X":
                links.add(row[col + 1])
    if not gpu_cols:
        return None
    nvlinks = sorted((int(link[2:]) for link in links if re.fullmatch(r"NV\d+", link)))
    if nvlinks:
        gpu = (f"NVLink between GPUs (NV{nvlinks[0]}"
               + (f"-NV{nvlinks[-1]}" if nvlinks[-1] != nvlinks[0] else "") + ")")
    elif links:
        gpu = f"PCIe between GPUs ({'/'.join(sorted(links))})"
    else:
        gpu = "1 GPU"
    return gpu + (f"; NICs in topology: {', '.join(nics)}" if nics else "")


def infiniband_summary(env):
    ports = env.get("infiniband_ports") or []
    if ports:
        kinds = sorted({f"{port.get('link_layer') or '?'} {port.get('rate') or '?'} {port.get('state') or '?'}"
                        for port in ports})
        return f"{len(ports)} port(s) on {', '.join(sorted({port['device'] for port in ports}))}: " \
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
            "versions": ", ".join(f"{label} {env[key]}" for key, label in VERSIONS if env.get(key)),
            "cpu": f"{env.get('cpu') or 'unknown CPU'} ({env.get('cpu_count') or '?'} cores"
                   + (f", {tables.gib(env['memory_bytes']):.0f} GiB)" if env.get("memory_bytes") else ")"),
            "topology": topology_summary(env.get("gpu_topology")),
            "infiniband": infiniband_summary(env)}


def environment_block(results) -> str:
    systems: dict = {}   # facts (without topology, which only local rank 0 has) -> details
    for rec in _records(results):
        facts = system_of(rec)
        key = (facts["device"], facts["versions"], facts["cpu"], facts["infiniband"])
        system = systems.setdefault(key, {"facts": facts, "hosts": set(), "topology": set(),
                                          "frameworks": set()})
        system["hosts"].add(rec.get("host") or "?")
        if facts["topology"]:
            system["topology"].add(facts["topology"])
        fw = rec.get("framework") or {}
        if fw.get("name"):
            system["frameworks"].add(f"{fw['name']} {fw.get('version') or '?'}")
    if not systems:
        return "## Environment\nno rank records to tell"
    lines = ["## Environment"]
    for number, system in enumerate(systems.values(), 1):
        facts = system["facts"]
        hosts = sorted(system["hosts"])
        shown = ", ".join(hosts[:8]) + (f" and {len(hosts) - 8} more" if len(hosts) > 8 else "")
        inter = "; ".join(sorted(system["topology"])) or "no GPU topology"
        inter += f"; InfiniBand {facts['infiniband']}" if facts["infiniband"] else "; no InfiniBand"
        lines += [f"- system {number}: {len(hosts)} host(s): {shown}",
                  f"  devices: {facts['device']} per host" + (f"; {facts['versions']}" if facts["versions"] else ""),
                  f"  CPU: {facts['cpu']}",
                  f"  interconnect: {inter}",
                  f"  frameworks: {', '.join(sorted(system['frameworks'])) or 'unknown'}"]
    return "\n".join(lines + images.environment_lines(results))
