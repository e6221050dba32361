"""Whether a training step waits on the GPU: asked once by the harness after warm-up, untimed
(the record's `step_sync`). A point whose steps wait on the device each step cannot be judged
by how far its device trails its host (analysis/figures/host_bound.py, docs/anatomy.md): the
host is held back to the device's pace whoever is slower.

Measured, not declared: one step is enqueued behind a device sleep that outlasts twice the
host's time to enqueue a step. If step() returns while the sleep still runs, nothing in it
waited on the device; if the sleep is over by then, something did (an `.item()` or `.tolist()`:
fp16's GradScaler.step reads found_inf so unless the optimizer is fused; a MoE layer's split
sizes; a synchronize). Two extra steps (the calibration's and the probe's) and the sleep: no
step of the window. Standard library + torch only: this runs in the framework's Python.
"""
import time

import torch

CALIBRATION_CYCLES = 10_000_000   # a few milliseconds of torch.cuda._sleep, timed by events
MARGIN_S = 0.02                   # beside twice the host's time for one step


def probe(step, device) -> dict:
    """{syncs, sleep_s, host_s}: `host_s` the host's time in the probe's step() call; or
    {syncs: None, error} where the device cannot be made to sleep."""
    if not hasattr(torch.cuda, "_sleep"):
        return {"syncs": None, "error": "torch.cuda._sleep is missing: the probe cannot run"}
    torch.cuda.synchronize(device)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(CALIBRATION_CYCLES)
    b.record()
    t0 = time.perf_counter()
    step()
    enqueue_s = time.perf_counter() - t0      # a step's host time (the device's too, if it waits)
    torch.cuda.synchronize(device)
    cycles_per_s = CALIBRATION_CYCLES / max(a.elapsed_time(b) / 1e3, 1e-6)
    sleep_s = 2 * enqueue_s + MARGIN_S
    over = torch.cuda.Event()
    torch.cuda._sleep(int(cycles_per_s * sleep_s))
    over.record()
    t0 = time.perf_counter()
    step()
    host_s = time.perf_counter() - t0
    syncs = over.query()                      # the sleep already over when step() returned
    torch.cuda.synchronize(device)
    return {"syncs": bool(syncs), "sleep_s": sleep_s, "host_s": host_s}
