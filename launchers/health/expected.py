"""The site's own figures (health.expect; docs/health.md, "The site's figures"), as LBNL
NHC's expected values (check_hw_ib's rate, a GPU count) and nccl-tests' minimum bandwidth
(NCCL_TESTS_MIN_BW): below one is sick, whatever the other nodes do. The allocation's own
median and reference need 3 nodes and a healthy majority; these judge 2 nodes, and an
allocation whose nodes are all equally slow.

- gpus_per_node: a node with fewer GPUs (NVML's count, or its slurmd's gres; CUDA counts
  only the job's share, so that count is not judged), or with none, is sick;
- ib_rate_gbits: a node whose slowest InfiniBand port is slower, or that has none, is sick;
- matmul_tflops: a node one of whose devices multiplies slower is sick;
- link_gbytes_s: a slower link is slow (`link_floors`, read by the link rule in
  healthchecks/linktest.py), and so is one that cannot move health.link_mb within
  health.link_cap_s: the cap's own floor.

A check the site did not ask for (health.checks) is left as it is.
"""


def _sick(check: dict, reason: str) -> None:
    """Mark a check sick, after any reason it was sick for already."""
    prior = check.get("reason") if check.get("status") == "sick" else None
    check.update(status="sick", reason=f"{prior}; {reason}" if prior else reason)


def nodes(rows: list, settings: dict) -> None:
    """Judge each node's checks (verdict rows) against the site's figures, in place."""
    expect = settings.get("expect") or {}
    asked = settings.get("checks") or ()
    for row in rows:
        checks = row["checks"]
        gpus = expect.get("gpus_per_node")
        dev = checks.get("devices")
        if gpus and dev and "devices" in asked:
            if dev.get("status") == "skipped":
                _sick(dev, f"no GPU found; the site's nodes have {gpus} (health.expect.gpus_per_node)")
            elif dev.get("source") != "CUDA" and (dev.get("count") or 0) < gpus:
                _sick(dev, f"{dev.get('count') or 0} GPU(s); the site's nodes have {gpus} "
                      "(health.expect.gpus_per_node)")
        rate = expect.get("ib_rate_gbits")
        ib = checks.get("infiniband")
        if rate and ib and "infiniband" in asked:
            if ib.get("value") is None:
                _sick(ib, f"no InfiniBand port rate ({ib.get('reason')}); the site expects "
                      f"{rate:g} Gb/s (health.expect.ib_rate_gbits)")
            elif ib["value"] < rate:
                _sick(ib, f"slowest port {ib['value']:g} Gb/s, below the site's {rate:g} Gb/s "
                      "(health.expect.ib_rate_gbits)")
        tflops = expect.get("matmul_tflops")
        if tflops and "matmul" in asked:
            slow = [(r, rec["checks"]["matmul"]["value"]) for r, rec in row["ranks"].items()
                    if rec and ((rec.get("checks") or {}).get("matmul") or {}).get("value") is not None
                    and rec["checks"]["matmul"]["value"] < tflops * 1000]
            if slow:
                r, gflops = min(slow, key=lambda rv: rv[1])
                _sick(checks.setdefault("matmul", {}), f"rank {r}: {gflops / 1000:.3g} TFLOP/s, below "
                      f"the site's {tflops:g} TFLOP/s (health.expect.matmul_tflops)")


def link_floors(settings: dict) -> list:
    """[(GB/s, why)]: the rates below which a link is slow, whatever the others do."""
    expect = settings.get("expect") or {}
    floors = []
    if expect.get("link_gbytes_s"):
        floors.append((float(expect["link_gbytes_s"]), "health.expect.link_gbytes_s"))
    if settings.get("link_cap_s") and settings.get("link_mb"):
        floors.append((float(settings["link_mb"]) * 2**20 / float(settings["link_cap_s"]) / 1e9,
                       "health.link_cap_s"))
    return floors
