"""torch.nn.DataParallel (one process, N GPUs) against the suite's DistributedDataParallel
result for the same model and global batch (docs/comm.md).

    python benchmarks/dp_vs_ddp.py [--model resnet50] [--size full] [--batch-size 8]
                                   [--devices N] [--sweep SWEEP]

DataParallel needs several devices in one process, so it is no framework option of
the suite's workers (one rank per device). This script measures it with the suite's
method (warm-up steps, sync, timed steps with a sync only at the far edge; samples /
window) on a global batch of batch_size x N on cuda:0..N-1, and takes DDP's figure
from a sweep (--sweep) or runs that one point itself through `python -m launch`.
Without >= 2 CUDA devices it says so and exits 0.
"""
import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORK = "pytorch"  # DataParallel is PyTorch's: the sweep it runs and the rows it reads
sys.path.insert(0, str(ROOT))


def dp_throughput(model_cfg, batch, devices, warmup, steps, amp):
    import torch
    from frameworks.pytorch import models

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # as the worker
    torch.backends.cudnn.benchmark = True
    model, loss_fn = models.build_model(model_cfg)
    model = torch.nn.DataParallel(model.cuda(0), device_ids=list(range(devices)))
    opt = models.build_optimizer(model_cfg, model.parameters())
    inputs, labels = models.synthetic_batch(model_cfg, batch * devices, torch.device("cuda", 0), 0)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(*inputs), *labels)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return batch * devices * steps / (time.perf_counter() - t0)


def ddp_throughput(args, devices):
    import analysis

    sweep = args.sweep
    if sweep is None:
        sweep = tempfile.mkdtemp(prefix="dp_vs_ddp-")
        cmd = [sys.executable, "-m", "launch", f"framework={FRAMEWORK}", f"model={args.model}",
               f"model.size={args.size}", f"batch_size={args.batch_size}", f"gpus_per_node={devices}",
               f"precision={args.precision}", "precision.amp_dtype=bf16", f"warmup_steps={args.warmup}",
               f"measure_steps={args.steps}", "repeats=1", "device=cuda", f"output_root={sweep}"]
        subprocess.run(cmd, cwd=ROOT, check=True)
    p = analysis.load(sweep).points
    p = p[(p.bench == "train") & (p.framework == FRAMEWORK) & (p.model == args.model)
          & (p.model_size == args.size) & (p.precision == args.precision)
          & (p.batch_size == args.batch_size) & (p.devices == devices) & (~p.compile)]
    ok = p[p.throughput.notna()]
    return (float(ok.throughput.iloc[0]), str(sweep)) if len(ok) else (None, str(sweep))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet50", choices=["resnet50", "bert_base"])
    ap.add_argument("--size", default="full")
    ap.add_argument("--batch-size", type=int, default=8, help="per device, as the suite's batch_size")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "amp"])
    ap.add_argument("--devices", type=int, help="default: every visible GPU")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--sweep", help="a sweep holding the DDP point; default: run it now")
    args = ap.parse_args(argv)

    import torch
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    devices = args.devices or found
    if found < 2 or devices < 2 or devices > found:
        print(f"DataParallel needs several CUDA devices in one process; this machine has {found} "
              f"(asked for {devices}). Nothing measured.")
        return 0
    from omegaconf import OmegaConf
    from launchers.plan.points import resolve_model
    cfg = OmegaConf.load(ROOT / "conf" / "model" / f"{args.model}.yaml")
    cfg.size = args.size
    model_cfg = resolve_model(cfg)

    dp = dp_throughput(model_cfg, args.batch_size, devices, args.warmup, args.steps,
                       args.precision == "amp")
    ddp, sweep = ddp_throughput(args, devices)
    print(f"{args.model} ({args.size}, {args.precision}), global batch {args.batch_size * devices} "
          f"on {devices} x {torch.cuda.get_device_name(0)}")
    print(f"  DataParallel (1 process):          {dp:10.1f} samples/s")
    print("  DistributedDataParallel (suite):   " +
          (f"{ddp:10.1f} samples/s   DDP/DP = {ddp / dp:.2f}" if ddp else f"no ok point in {sweep}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
