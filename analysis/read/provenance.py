"""What each point ran on, as a certification keeps it beside its verdict (certify/,
docs/certify.md): the container image (its runtime, reference and digest), the driver, CUDA
and NCCL versions, the framework and its version, the device and the hosts; from the point's
rank records as analysis.load read them (Results.environments). A fact no rank recorded is
None (a CPU has no driver, a venv no image)."""
from analysis.read import images

VERSIONS = {"driver": "nvidia_driver", "cuda": "cuda", "nccl": "nccl"}   # ours: the record's


def of_points(results) -> dict:
    """(sweep, point) -> {image, digest, runtime, framework, framework_version, device,
    driver, cuda, nccl, hosts}: the first rank record that states each fact; every host any
    of its ranks ran on, sorted."""
    out, hosts = {}, {}
    for e in results.environments:
        key = (str(e["sweep"]), e["point"])
        env, framework = e.get("environment") or {}, e.get("framework") or {}
        box = e.get("container") or {}
        facts = {"image": box.get("image"), "digest": box.get("digest"),
                 "runtime": box.get("runtime"), "framework": framework.get("name"),
                 "framework_version": framework.get("version"), "device": env.get("device"),
                 **{ours: env.get(theirs) for ours, theirs in VERSIONS.items()}}
        have = out.setdefault(key, dict.fromkeys(facts))
        for k, v in facts.items():
            if have[k] is None and v is not None:
                have[k] = str(v)
        hosts.setdefault(key, set()).add(e.get("host"))
    for key, p in out.items():
        p["hosts"] = sorted(h for h in hosts[key] if h)
        p["image_label"] = images.label(p if p["image"] else None)
    return out
