"""What rank 0's heartbeat costs a timed step (frameworks/common/heartbeat.py; issue 52, item 4).

A tiny model's timed window (a 2-layer MLP, batch 8: a step of tens of microseconds, so that
any cost shows), run as the harness runs it: once bare, once with the heartbeat (the int bump
per step and rank 0's thread writing the file every 2 s), rounds alternated, the median of
each's per-step time. Results: benchmarks/heartbeat_cost.md.

    .venv/bin/python benchmarks/heartbeat_cost.py [--rounds 10] [--steps 5000]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from contract import paths  # noqa: E402
from frameworks.common import heartbeat  # noqa: E402


class Spec:
    warmup_steps, repeat = 0, 0

    def __init__(self, record_dir, steps):
        self.record_dir, self.measure_steps = record_dir, steps


def window(step, steps, beat) -> float:
    """Seconds per step of one window, with or without the heartbeat."""
    if beat is None:
        w0 = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - w0) / steps
    w0 = time.perf_counter()
    for _ in range(steps):
        step()
        beat.done += 1
    per = (time.perf_counter() - w0) / steps
    beat.stop()
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 32), torch.randn(8, 1)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    window(step, 500, None)  # warm-up
    rdir = os.path.join(tempfile.mkdtemp(), paths.POINTS_DIR, "000-a", paths.repeat_name(0))
    os.makedirs(rdir)
    bare, beating = [], []
    for r in range(args.rounds):
        for kind in (("bare", "beat") if r % 2 == 0 else ("beat", "bare")):
            if kind == "bare":
                bare.append(window(step, args.steps, None))
            else:
                beating.append(window(step, args.steps, heartbeat.start(Spec(rdir, args.steps), 0)))
    b, h = statistics.median(bare), statistics.median(beating)
    bump = min(timeit.repeat("beat.done += 1", globals={"beat": heartbeat.Beat(None, 0, 1)},
                             number=1_000_000, repeat=5)) / 1_000_000
    print(f"{args.rounds} rounds x {args.steps} steps, alternated; torch {torch.__version__}")
    for name, median, times in (("bare window:       ", b, bare), ("with the heartbeat:", h, beating)):
        print(f"{name}    {median * 1e6:8.2f} us/step "
              f"(median; spread {min(times) * 1e6:.2f}-{max(times) * 1e6:.2f})")
    print(f"difference:            {(h - b) * 1e6:+8.2f} us/step ({(h / b - 1) * 100:+.2f}%) of the medians, "
          f"{(min(beating) - min(bare)) * 1e6:+.2f} us/step of the fastest windows")
    print(f"the int bump alone:    {bump * 1e9:8.1f} ns")


if __name__ == "__main__":
    main()
