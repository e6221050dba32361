"""`python -m healthchecks.rank --spec SPEC`: one rank of a health step.

Started like a worker (srun on Slurm, processes on the local launcher), one rank per device
with the same distributed environment (frameworks/common/distenv.py). Every rank times a
matrix multiply on its device; the node's first rank runs the node's checks
(healthchecks/nodechecks.py); then the node leaders test the links between nodes in
two rings (healthchecks/linktest.py; each transfer capped to health.link_cap_s) over
torch.distributed: gloo on CPU, NCCL on GPUs.
Each rank writes its record (paths.rank_record_name) into the spec's record_dir, whole or
not at all, however it ends; launchers/health/verdict.py judges them together.
Standard library and torch: this runs in the suite's Python, or the PyTorch container.
"""
import argparse
import datetime
import os
import signal
import socket
import sys
import time

from contract import nccl_net, paths, records
from contract.spec import HealthSpec, read
from frameworks.common import distenv, environment
from healthchecks import linktest, nodechecks


def device_of(spec: HealthSpec, local_rank: int) -> str:
    import torch
    if spec.device != "cpu" and torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        return f"cuda:{local_rank % torch.cuda.device_count()}"
    return "cpu"


def run(spec: HealthSpec, dist, record: dict) -> None:
    settings = spec.settings
    device = device_of(spec, dist.local_rank)
    record["device"] = device
    checks = {}
    if dist.local_rank == 0:
        checks.update(nodechecks.run_node(settings, record["host"]))
    if "matmul" in settings.checks:
        try:
            checks["matmul"] = nodechecks.matmul(settings, device)
        except Exception as exc:  # a device that cannot multiply is sick, not a crash
            checks["matmul"] = nodechecks.sick(f"the matrix multiply failed: {type(exc).__name__}: {exc}")
    else:
        checks["matmul"] = nodechecks.skipped("not asked (health.checks)")
    record["checks"] = checks
    nodes = dist.world_size // spec.gpus_per_node
    if "links" not in settings.checks or nodes < 2:
        record["links"] = []
        return
    import torch.distributed as td
    backend = "nccl" if device != "cpu" else "gloo"
    if backend == "nccl":  # the network NCCL chooses, by its own lines (contract/nccl_net.py)
        os.environ.update(nccl_net.debug_env(os.environ, spec.record_dir, dist.rank))
    td.init_process_group(backend, init_method="env://", rank=dist.rank, world_size=dist.world_size,
                          timeout=datetime.timedelta(seconds=spec.link_timeout_s))
    try:
        record["links"] = linktest.measure(dist, spec.gpus_per_node,
                                           int(settings.link_mb * 2**20),
                                           int(settings.link_iters), device,
                                           cap_s=settings.get("link_cap_s"))
    finally:
        td.destroy_process_group()
        nccl = nccl_net.read(spec.record_dir, dist.rank) if backend == "nccl" else None
        if nccl:
            record.update(nccl=nccl, infiniband_ports=environment.infiniband_ports())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m healthchecks.rank")
    parser.add_argument("--spec", required=True)
    args = parser.parse_args(argv)
    try:
        spec = read(args.spec, HealthSpec)
    except (OSError, ValueError, TypeError) as exc:
        print(f"health rank: {exc}", file=sys.stderr)
        return 2
    # A cancel or the step's timeout: the record still says how the rank ended.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("SIGTERM: the health step was stopped"))
    dist = distenv.from_env()
    record = {"schema": paths.HEALTH_RANK_SCHEMA, "version": paths.SCHEMA_VERSION,
              "rank": dist.rank, "local_rank": dist.local_rank,
              "node": dist.rank // spec.gpus_per_node, "host": socket.gethostname(),
              "started_unix": time.time(), "status": "ok", "error": None}
    code = 0
    try:
        run(spec, dist, record)
    except BaseException as exc:  # noqa: B902 (SIGTERM's SystemExit too): the record says why
        record.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        code = 1
    record["ended_unix"] = time.time()
    records.write_json_atomic(os.path.join(spec.record_dir, paths.rank_record_name(dist.rank)),
                              record)
    return code


if __name__ == "__main__":
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # quiet gloo's "hostname" warning
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
