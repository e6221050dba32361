"""One pipelined step through frameworks/pytorch/titan/session.py's `microbatches` (the call the
torchtitan path makes of its schedule), on one CPU process in any torch (the suite's 2.13, or
torch 2.11 as the lent GPU machines carry), for tests/unit/test_titan_pipeline.py.

torchtitan's own model cannot train on a CPU (FlexAttention has no CPU backward), so the
schedule here is torch's own over a small model whose loss takes the global batch's token
count as torchtitan's does (`global_valid_tokens`): each schedule named on the command line
runs one step of 2 micro-batches over its stages, all on this rank (a process group of one),
and the result is compared with the same model's plain forward and backward. Prints one JSON
line: per schedule, whether every parameter has a gradient, the largest difference from the
plain gradients and losses, or the error that stopped it.

    python tests/pipeline_probe.py gpipe 1f1b [interleaved_1f1b]
"""
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from frameworks.pytorch.layouts.parallelize import SCHEDULES  # noqa: E402
from frameworks.pytorch.titan import session as titan  # noqa: E402

TOKENS = 4   # the global batch's: 2 micro-batches of 2


def loss_fn(out, target, global_valid_tokens=None):
    """torchtitan's loss: the micro-batch's summed loss over the global batch's tokens."""
    return nn.functional.cross_entropy(out, target, reduction="sum") / global_valid_tokens


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))


def one(name: str) -> dict:
    torch.manual_seed(1)
    xs, ys = [torch.randn(2, 4) for _ in range(2)], [torch.randint(0, 3, (2,)) for _ in range(2)]
    plain = model()
    want = [loss_fn(plain(x), y, torch.tensor(TOKENS)) for x, y in zip(xs, ys)]
    sum(want).backward()
    piped = model()
    if name == "interleaved_1f1b":   # two stages, both on this rank
        parts = [PipelineStage(piped[:2], 0, 2, torch.device("cpu")),
                 PipelineStage(piped[2:], 1, 2, torch.device("cpu"))]
    else:
        parts = PipelineStage(piped, 0, 1, torch.device("cpu"))
    schedule = SCHEDULES[name](parts, n_microbatches=2, loss_fn=loss_fn, scale_grads=False)   # torchtitan's
    losses = []
    try:
        titan.microbatches(schedule, arg_mbs=[(x,) for x in xs], kwarg_mbs=[{}, {}], target_mbs=ys,
                           losses=losses, loss_kwargs={"global_valid_tokens": torch.tensor(TOKENS)},
                           return_outputs=False)
    except Exception as exc:  # noqa: BLE001 (the test reads which error stopped it)
        return {"error": f"{type(exc).__name__}: {exc}"}
    grads = [(p.grad, q.grad) for p, q in zip(piped.parameters(), plain.parameters())]
    return {"all_gradients": all(g is not None for g, _ in grads),
            "grad_diff": max(float((g - w).abs().max()) if g is not None else float("inf") for g, w in grads),
            "loss_diff": max(abs(float(a) - float(b)) for a, b in zip(losses, want)) if losses else None}


def main(names) -> dict:
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/rendezvous", rank=0, world_size=1)
        try:
            return {"torch": torch.__version__, **{name: one(name) for name in names}}
        finally:
            dist.destroy_process_group()


if __name__ == "__main__":
    print("PROBE " + json.dumps(main(sys.argv[1:])), flush=True)
