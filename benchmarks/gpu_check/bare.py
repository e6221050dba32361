"""The training step of a point as a bare loop, no harness, for the harness/bare ratio:

    python -m benchmarks.gpu_check.bare SPEC_JSON suite|torchvision [REPEATS]

`suite`: the suite's own model, batch, optimizer and clipping (frameworks/pytorch/models/);
`torchvision`: torchvision's ResNet-50 with SGD, an idiomatic loop no one here wrote. Both
with the spec's batch, precision (AMP in its dtype, fp16 with a GradScaler), channels_last,
warm-up and timed steps, the loss read after the timed steps; timed by the host clock around a
device sync, as a script would time it. Prints a line per repeat and, last, one line
`BARE {json}` (samples/s of each repeat, the device, its peak memory).
"""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


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


def main(path: str, kind: str, repeats: int = 2) -> dict:
    spec = json.load(open(path))
    cuda = spec["device"] != "cpu" and torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if cuda:   # as the suite's setup_device
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
    amp = spec["precision"] == "amp"
    dtype = torch.float16 if cuda and spec.get("amp_dtype") == "fp16" else torch.bfloat16
    torch.manual_seed(spec["seed"])
    model, inputs, labels, loss_fn, opt, clip = build(spec, kind, device)
    if cuda and spec["model"].get("channels_last"):
        model = model.to(memory_format=torch.channels_last)
        inputs = (inputs[0].contiguous(memory_format=torch.channels_last),) + tuple(inputs[1:])
    scaler = torch.amp.GradScaler("cuda", enabled=amp and dtype == torch.float16)
    params = list(model.parameters())

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=amp):
            loss = loss_fn(model(*inputs), *labels)
        scaler.scale(loss).backward()
        if clip is not None:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, clip)
        scaler.step(opt)
        scaler.update()
        return loss.detach()

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rates, batch = [], spec["batch_size"]
    for r in range(repeats):
        for _ in range(spec["warmup_steps"]):
            step()
        sync()
        t0 = time.perf_counter()
        losses = [step() for _ in range(spec["measure_steps"])]
        sync()
        rates.append(spec["measure_steps"] * batch / (time.perf_counter() - t0))
        if not all(torch.isfinite(x) for x in losses):
            raise FloatingPointError(f"bare {kind}: a non-finite loss in repeat {r}")
        print(f"bare {kind} repeat {r}: {rates[-1]:.1f} samples/s", flush=True)
    return {"kind": kind, "samples_per_s": rates, "device": torch.cuda.get_device_name() if cuda else "cpu",
            "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None, "torch": torch.__version__}


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    print("BARE " + json.dumps(main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:4]))), flush=True)
