"""The training step of a point as a bare loop, no harness, for the harness/bare ratio:

    python -m benchmarks.gpu_check.bare SPEC_JSON suite|torchvision [ROUNDS] [--gated]

`suite`: the suite's own model, batch, optimizer and clipping (frameworks/pytorch/models/);
`torchvision`: torchvision's ResNet-50 with SGD, an idiomatic loop no one here wrote. Both
with the spec's batch, the AMP dtype the harness runs (frameworks/common/accelerator.py's
rule: a CPU runs bf16 where fp16 is asked; fp16 with a GradScaler), channels_last where the
harness converts (a GPU), warm-up and timed steps, the loss read after the timed steps; timed
by the host clock around a device sync, as a script would time it. Each round builds the model,
batch and optimizer afresh from the seed, then runs the spec's warm-up and timed steps.
`--gated`: each round waits for a line on stdin (pair.py alternates them with the harness's).
Prints `ROUND {json}` per round and, last, `BARE {json}` (samples/s of each round, the dtype,
the threads, the device, its peak memory).
The process's environment is its caller's: pair.py gives it the rank's.
"""
import json
import os
import sys
import time

if "torchvision" in sys.argv[2:3]:   # where it is missing, say so before torch's seconds of import
    import torchvision  # noqa: F401

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from frameworks.common import accelerator  # noqa: E402  (standard library only)
# What a PyTorch rank imports before it builds (torch._dynamo among them): the same modules,
# so the same interpreter state, in both processes of a pair (pair.py).
import frameworks.pytorch.worker  # noqa: E402,F401

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def build(spec: dict, kind: str, device):
    """(model, inputs, labels, loss_fn, optimizer, clip norm or None)."""
    cfg, batch = spec["model"], spec["batch_size"]
    if kind == "torchvision":
        import torchvision
        model = torchvision.models.resnet50(num_classes=cfg["num_classes"]).to(device)
        size = cfg["image_size"]
        inputs = (torch.randn(batch, 3, size, size, device=device),)
        labels = (torch.randint(0, cfg["num_classes"], (batch,), device=device),)
        o = cfg["optimizer"]
        opt = torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=o["momentum"],
                              weight_decay=o["weight_decay"])
        return model, inputs, labels, lambda out, t: torch.nn.functional.cross_entropy(out.float(), t), opt, None
    from contract import modes
    from frameworks.pytorch import models
    model, loss_fn = models.build_model(cfg)
    model = model.to(device)
    inputs, labels = models.synthetic_batch(cfg, batch, device, spec["seed"])
    return model, inputs, labels, loss_fn, models.build_optimizer(cfg, model.parameters()), modes.clip_norm(cfg)


class _Spec:
    """What accelerator.amp_dtype reads of a spec, from its JSON."""

    def __init__(self, spec: dict):
        self.precision, self.amp_dtype = spec["precision"], spec.get("amp_dtype")


def _step(spec: dict, kind: str, device, amp, dtype, cuda):
    """The plain training step, on a model, batch and optimizer built afresh from the seed."""
    torch.manual_seed(spec["seed"])
    model, inputs, labels, loss_fn, opt, clip = build(spec, kind, device)
    if cuda and spec["model"].get("channels_last"):   # where the session converts (a GPU)
        model = model.to(memory_format=torch.channels_last)
        inputs = (inputs[0].contiguous(memory_format=torch.channels_last),) + tuple(inputs[1:])
    scaler = torch.amp.GradScaler("cuda", enabled=amp == "fp16")
    params = list(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=amp is not None):
            loss = loss_fn(model(*inputs), *labels)
        scaler.scale(loss).backward()
        if clip is not None:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, clip)
        scaler.step(opt)
        scaler.update()
        return loss.detach()
    return step


def main(path: str, kind: str, rounds: int = 2, gated: bool = False) -> dict:
    spec = json.load(open(path))
    cuda = spec["device"] != "cpu" and torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if cuda:   # as the suite's setup_device
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
    amp = accelerator.amp_dtype(_Spec(spec), cuda)   # the harness's rule (session.py)
    dtype = DTYPES[amp or "bf16"]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rates, batch = [], spec["batch_size"]
    for r in range(rounds):
        if gated and not sys.stdin.readline():   # the caller is gone
            break
        # each round from the seed, as each harness round's fresh rank: the same weights at the
        # same steps (benchmarks/harness_overhead.md: trained on across rounds, it read faster)
        step = _step(spec, kind, device, amp, dtype, cuda)
        for _ in range(spec["warmup_steps"]):
            step()
        sync()
        t0 = time.perf_counter()
        losses = [step() for _ in range(spec["measure_steps"])]
        sync()
        rates.append(spec["measure_steps"] * batch / (time.perf_counter() - t0))
        if not all(torch.isfinite(x) for x in losses):
            raise FloatingPointError(f"bare {kind}: a non-finite loss in round {r}")
        del step, losses
        if cuda:   # idle while the harness's round runs: hold nothing of this round
            torch.cuda.empty_cache()
        print("ROUND " + json.dumps({"round": r, "samples_per_s": rates[-1]}), flush=True)
    return {"kind": kind, "samples_per_s": rates, "amp_dtype": amp, "torch_threads": torch.get_num_threads(),
            "device": torch.cuda.get_device_name() if cuda else "cpu",
            "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None, "torch": torch.__version__}


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--gated"]
    if len(args) < 2:
        sys.exit(__doc__)
    rounds = int(args[2]) if len(args) > 2 else 2
    print("BARE " + json.dumps(main(args[0], args[1], rounds, gated="--gated" in sys.argv)), flush=True)
