"""Several cases of rank probes (tests/moe_grad_probe.py, tests/titan_cpu_probe.py: each a `main`)
in one set of processes: each rank imports torch (and torchtitan) and compiles FlexAttention's
block mask once for all of them, instead of once a case under a torch.distributed.run of its
own; a case may name a probe of its own, so that two probes' cases share the ranks too. Case
after case, the first `ranks` processes form a process group of their own (gloo, on a port rank
0 holds from the start: no other process takes it meanwhile) and run it; the others wait for the
next. A case whose step leaves its group broken (a pipeline whose peer stopped) goes last.

The test's side is `run`; the rank's side is `serve` (`python -m tests.rank_probes`)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(script: str, cases: list, python: str = sys.executable, timeout: int = 600) -> list:
    """cases: [{"ranks": n, "args": [the probe's arguments], "probe": its script, `script`
    where none}] -> per case, (its ranks' PROBE outputs sorted by rank, the processes' last
    output for an assertion's message); fewer outputs than `ranks` where a rank stopped: the
    caller asserts their number. Each rank's output goes to a file, so that no rank blocks on a
    full pipe while its peers wait on it; a rank dies with this process, however it ends
    (contract/owner.py)."""
    from contract import owner
    cases = [dict(c, probe=c.get("probe", script)) for c in cases]
    world = max(c["ranks"] for c in cases)
    procs, logs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for rank in range(world):
            log = open(os.path.join(tmp, f"rank-{rank}.log"), "w+")
            env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT, RANK=str(rank),
                       MASTER_ADDR="127.0.0.1", PROBE_PORTS=tmp)
            procs.append(subprocess.Popen([python, "-m", "tests.rank_probes", json.dumps(cases)], cwd=ROOT, env=env,
                                          stdout=log, stderr=subprocess.STDOUT, text=True,
                                          preexec_fn=owner.die_with_owner()))
            logs.append(log)
        deadline = time.monotonic() + timeout
        try:
            for p in procs:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        text = []
        for log in logs:
            log.seek(0)
            text.append(log.read())
            log.close()
    outputs = [[] for _ in cases]
    for line in "\n".join(text).splitlines():
        if line.startswith("PROBE "):
            out = json.loads(line[len("PROBE "):])
            outputs[out.pop("case")].append(out)
    tail = "\n".join(t[-3000:] for t in text)
    return [(sorted(o, key=lambda o: o["rank"]), tail) for o in outputs]


def _port(case: int, rank: int, servers: list) -> int:
    """Case `case`'s rendezvous port: rank 0 opens a TCPStore server on a port of the system's
    choosing and keeps it (its process group's store, multi-tenant, is then that server) and
    writes the port to a file the other ranks wait for."""
    path = os.path.join(os.environ["PROBE_PORTS"], f"port-{case}")
    if rank == 0:
        import torch.distributed as torch_dist
        servers.append(torch_dist.TCPStore("127.0.0.1", 0, is_master=True, multi_tenant=True))
        with open(path + ".part", "w") as f:
            f.write(str(servers[-1].port))
        os.replace(path + ".part", path)   # whole or absent
    deadline = time.monotonic() + 300
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank 0 gave no port for case {case} in 300 s")
        time.sleep(0.05)
    with open(path) as f:
        return int(f.read())


def _main(script: str, probes: dict):
    """The probe's `main`, its module loaded on its first case (the probes' imports and
    set-up at their first use, in the order of the cases)."""
    if script not in probes:
        name = os.path.basename(script)[:-3]
        spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, script))
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        probes[script] = module.main
    return probes[script]


def serve() -> None:
    """The rank's side: argv[1] the cases; a probe's main(*a case's args) -> (its output, a
    close() to end its process group, or None where the group is left broken)."""
    rank = int(os.environ["RANK"])
    cases, servers, probes = json.loads(sys.argv[1]), [], {}
    for i, case in enumerate(cases):
        n = case["ranks"]
        if rank >= n:
            continue
        # what a rank under torch.distributed.run would read, for this case's group
        os.environ.update(WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(n),
                          MASTER_PORT=str(_port(i, rank, servers)))
        out, close = _main(case["probe"], probes)(*case["args"])
        line = "PROBE " + json.dumps(dict(out, case=i)) + "\n"
        os.write(1, line.encode())   # one write: the ranks' lines never interleave
        if close is None or i == len(cases) - 1:
            break
        close()
    os._exit(0)   # a rank whose peer stopped mid-step would wait on gloo at exit


if __name__ == "__main__":
    serve()
