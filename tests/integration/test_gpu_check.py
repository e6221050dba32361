"""`make gpu-check DEVICE=cpu`: the GPU check's every stage rehearsed at tiny sizes on this CPU
(benchmarks/gpu_check/), as CI runs it, so that the one prepared GPU call cannot rot: its first
lines say what it found, every stage has a row in the table (what ran, its figure, or why it
did not), no stage failed, and one tarball holds every sweep, log and the table; within the
rehearsal's budget. And the way a lent GPU machine runs it: torch 2.11's interpreter with the
suite's needs installed from wheels (`make gpu-wheels` for this Python), a few stages only
(LENT_STAGES: the wheels' install, the first lines, a sweep, the bare loop no one here wrote
and the health check (its nvidia-ml-py from the wheels); the language models, checkpoints and
layouts under torch 2.11 are tests/integration/test_torch_2_11.py's: on a CPU a language
model's rank imports nothing from the wheels that ResNet-50's does not), to keep `make test`
short."""
import glob
import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

from benchmarks.gpu_check.__main__ import BUDGET_S as BUDGETS
from benchmarks.gpu_check.stages import ROUNDS, STAGES
from tests.frameworks_env import ROOT, require_torch_211

pytestmark = pytest.mark.e2e
BUDGET_S = BUDGETS["cpu"]   # the rehearsal's own: 6 minutes on 2 cores (its stages end sooner when the cores are free)
# the stage rows of a CPU's rehearsal: the sweeps' points, and what cannot run on this machine
ROWS = {"rn50 bf16", "rn50 fp16", "rn50-bare-bf16", "rn50-bare-fp16", "rn50-bare-torchvision", "bert",
        "bert-bare", "bert trace", "llama3", "moe deepseek_v3", "moe qwen3_moe", "moe gpt_oss", "gpt", "llama3-pp2",
        "health", "nccl", "checkpoint-async", "rn50-compile"}
# what torch 2.11's environment (torch and numpy) lacks that a lent machine's python3 has
LENT_MACHINE_HAS = ("packaging==26.4", "python-dateutil==2.9.0.post0", "six==1.17.0", "pillow==13.0.0")
LENT_STAGES = ("rn50", "rn50-bare-bf16", "health")   # the bf16 pair: torchvision's loop too


def rehearse(tmp, python=None, env=None, stages=None) -> tuple:
    out = tmp / "check"
    only = f" --stages {','.join(stages)}" if stages else ""
    args = ["make", "--no-print-directory", "gpu-check", "DEVICE=cpu",
            f"GPU_CHECK_ARGS=--out {out} --tar {tmp / 'check.tar.gz'}{only}"]
    if python:
        args.append(f"GPU_CHECK_PYTHON={python}")
    t0 = time.monotonic()
    res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=BUDGET_S + 120,
                         env=dict(os.environ, **(env or {})))
    return res, time.monotonic() - t0, out


def check(res, seconds, out, tmp, torch_version: str, stages=None) -> dict:
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-3000:]
    lines = res.stdout.splitlines()
    first = "\n".join(lines[:8])
    assert f"torch: {torch_version}" in first and "python: 3." in first and "torchtitan: " in first
    assert "suite imports: ok" in first
    table = json.load(open(out / "table.json"))
    rows = {r["stage"]: r for r in table["rows"]}
    bare_rows = {name for s in STAGES if s.name in (stages or ()) for _, name in s.bare}
    want = ROWS if stages is None else {r for r in ROWS if r.split(" ")[0] in stages or r in bare_rows}
    assert set(rows) == want and len(table["rows"]) == len(want)
    for name, row in rows.items():
        if name == "rn50-bare-torchvision" and row["status"] == "skipped":   # not installed here
            assert "torchvision" in row["note"]
            continue
        assert row["status"] == "ok", row
        assert row["figure"] and (row["value"] or 0) > 0, row
    for name in {"rn50-bare-bf16", "rn50-bare-fp16", "bert-bare"} & set(rows):   # rounds alternated
        row = rows[name]   # beside a bare loop: the harness's rank over the same rounds, the ratio's spread
        assert "(harness, its rank, same rounds)" in row["beside"] and row["ratio"] > 0
        assert row["spread"][0] <= row["ratio"] <= row["spread"][1] and isinstance(row["within_noise"], bool)
        assert f"{ROUNDS['cpu']} rounds alternated with the harness" in row["note"] and "both bf16, " in row["note"]
        assert len(glob.glob(str(out / name / "harness-*" / "rank-00000.json"))) == ROUNDS["cpu"]
    assert "harness / bare, rounds alternated: " in res.stdout
    assert rows["rn50 bf16"]["beside"] == "none published for cpu"
    for name in {"rn50 bf16", "llama3"} & set(rows):   # a CPU reads no energy counter, and says so
        assert "energy n/a: no NVML device: cpu" in rows[name]["note"], rows[name]
    assert "## gpu-check on cpu: " in res.stdout and f"| {list(rows)[-1]}" in res.stdout
    assert seconds < BUDGET_S + 60 and table["seconds"] < BUDGET_S
    with tarfile.open(tmp / "check.tar.gz") as tar:
        names = tar.getnames()
    for stage in (s for s in STAGES if stages is None or s.name in stages):   # every stage's log
        assert f"check/logs/{stage.name}.log" in names, stage.name
    assert any(n.startswith("check/rn50/points/") and n.endswith("rank-00000.json") for n in names)
    assert {"check/table.md", "check/console.txt"} <= set(names)
    return rows


def test_the_rehearsal_runs_every_stage_and_prints_the_table(tmp_path):
    res, seconds, out = rehearse(tmp_path)
    # the suite's torch, as its distribution names it (its __version__), without importing it here
    rows = check(res, seconds, out, tmp_path, importlib.metadata.version("torch"))
    assert "wheels: not needed" in res.stdout
    print(f"the rehearsal: {seconds:.0f} s")
    assert rows["nccl"]["note"].startswith("2 rank(s), gloo")   # one rank moves nothing
    # the traced point: its trace gzip'd in the tarball; a CPU's has no GPU kernels to split
    trace = "bert/points/000-pytorch-bert_base-amp-1x1-bs8/repeat-00/profile/rank-00000/trace.json.gz"
    assert rows["bert trace"]["note"].endswith(trace) and "no GPU kernels" in rows["bert trace"]["note"]
    with tarfile.open(tmp_path / "check.tar.gz") as tar:
        assert f"check/{trace}" in tar.getnames()


def test_the_rehearsal_as_a_lent_machine_runs_it(tmp_path):
    """torch 2.11's interpreter, which has torch, numpy and torchtitan 0.2.2's requirements, not the
    suite's: the check installs the wheels
    of `make gpu-wheels` (for this Python; plus what a lent machine's python3 has that this
    one lacks) into a folder of its own and runs every stage from there."""
    python = require_torch_211()
    wheels = tmp_path / "wheels"
    version = ".".join(map(str, sys.version_info[:2]))
    made = subprocess.run(["make", "--no-print-directory", "gpu-wheels", f"GPU_WHEELS_PYTHON={version}",
                           f"GPU_WHEELS_DIR={wheels}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    extra = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "-d", str(wheels), *LENT_MACHINE_HAS], capture_output=True, text=True, timeout=300)
    if made.returncode or extra.returncode:
        pytest.skip("no wheels: pip download failed (no network?): " + (made.stderr + extra.stderr)[-300:])
    res, seconds, out = rehearse(tmp_path, python, {"DLBENCH_WHEELS": str(wheels)}, LENT_STAGES)
    rows = check(res, seconds, out, tmp_path, "2.11", LENT_STAGES)
    assert rows["rn50-bare-torchvision"]["status"] == "ok"   # torchvision from the wheels
    assert f"wheels: {len(list(wheels.glob('*.whl')))} from {wheels}" in res.stdout
    # the wheels' torchtitan 0.2.2 loads with torch 2.11 (its datasets and tokenizers the environment's)
    assert res.stdout.split("torchtitan: ")[1].splitlines()[0].startswith("0.2.2 loads: llama3 and deepseek_v3")
    print(f"the rehearsal in torch 2.11 from wheels: {seconds:.0f} s")
