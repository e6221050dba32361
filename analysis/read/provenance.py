"""What each point ran on, as a certification keeps it beside its verdict (certify/,
docs/certify.md): the container image (its runtime, reference and digest), the driver, CUDA
and NCCL versions, the network NCCL used (contract/nccl_net.py), the framework, its version and
the releases of its packages (contract/versions.py), the device and the hosts; from the point's
rank records as analysis.load read them (Results.environments). A fact no rank recorded is
None (a CPU has no driver, a venv no image, gloo no NCCL network)."""
from analysis.read import images
from contract import nccl_net

VERSIONS = {"driver": "nvidia_driver", "cuda": "cuda", "nccl": "nccl"}   # ours: the record's


def of_points(results) -> dict:
    """(sweep, point) -> {image, digest, runtime, framework, framework_version, releases,
    device, driver, cuda, nccl, nccl_network, hosts}: the first rank record that states each
    fact; every host any of its ranks ran on, sorted."""
    out: dict = {}
    hosts: dict = {}
    for e in results.environments:
        key = (str(e["sweep"]), e["point"])
        env, framework = e.get("environment") or {}, e.get("framework") or {}
        box = e.get("container") or {}
        facts = {"image": box.get("image"), "digest": box.get("digest"),
                 "runtime": box.get("runtime"), "framework": framework.get("name"),
                 "framework_version": framework.get("version"),
                 "releases": framework.get("releases") or None, "device": env.get("device"),
                 **{ours: env.get(theirs) for ours, theirs in VERSIONS.items()},
                 "nccl_network": nccl_net.short(e["nccl"]) if e.get("nccl") else None}
        have = out.setdefault(key, dict.fromkeys(facts))
        for k, v in facts.items():
            if have[k] is None and v is not None:
                have[k] = v if isinstance(v, dict) else str(v)
        hosts.setdefault(key, set()).add(e.get("host"))
    for key, p in out.items():
        p["hosts"] = sorted(h for h in hosts[key] if h)
        p["image_label"] = images.label(p if p["image"] else None)
    return out
