"""The GPU check's stages and rows that need no run (benchmarks/gpu_check/): a collective of one
rank moves nothing, so the NCCL stage asks for two GPUs or more and shows no bandwidth of one
(contract/busbw.py's `moves`); the MoE stage trains each family's `gpu1` size on a GPU (a billion
parameters or more: tests/unit/test_deepseek_v3.py, test_qwen3_moe.py, test_gpt_oss.py), `tiny`
on a CPU (issue 51)."""
import json

from benchmarks.gpu_check import figures
from benchmarks.gpu_check.runner import Ran
from benchmarks.gpu_check.stages import STAGES, Context
from contract import paths

STAGE = {s.name: s for s in STAGES}


def test_one_gpu_skips_the_all_reduce_saying_it_needs_two(tmp_path):
    why = STAGE["nccl"].argv(Context("cuda", 1, str(tmp_path), 60))
    assert why == "1 GPU: an all_reduce moves data between two GPUs or more"
    assert "gpus_per_node=8" in STAGE["nccl"].argv(Context("cuda", 8, str(tmp_path), 60))
    # the CPU's rehearsal runs it on two processes (gloo), so the stage still rehearses
    assert "gpus_per_node=2" in STAGE["nccl"].argv(Context("cpu", 1, str(tmp_path), 60))


def _record(tmp_path, world_size: int):
    folder = tmp_path / "nccl" / paths.POINTS_DIR / "p0" / paths.repeat_name(0)
    folder.mkdir(parents=True)
    moves = world_size > 1
    rows = [{"op": "all_reduce", "bytes": 1 << 30, "wrong": 0, "algbw_gbps": 40.0 if moves else None,
             "busbw_gbps": 70.0 if moves else None}]
    (folder / paths.rank_record_name(0)).write_text(json.dumps(
        {"status": "ok", "world_size": world_size, "comm": rows, "environment": {"backend": "nccl"}}))


def test_a_record_of_one_rank_gives_no_bandwidth(tmp_path):
    _record(tmp_path, 1)
    [row] = figures._comm(STAGE["nccl"], Ran("nccl", rc=0), Context("cuda", 1, str(tmp_path)), {})
    assert row.status == "skipped" and row.figure == "" and row.value is None
    assert "one rank moves nothing" in row.note


def test_two_ranks_give_the_bus_bandwidth_at_the_largest_size(tmp_path):
    _record(tmp_path, 2)
    [row] = figures._comm(STAGE["nccl"], Ran("nccl", rc=0), Context("cuda", 2, str(tmp_path)), {})
    assert (row.status, row.figure, row.value) == ("ok", "70.0 GB/s busbw at 1024 MiB", 70.0)


def test_the_moe_stage_loads_a_gpu_and_rehearses_tiny(tmp_path):
    gpu = STAGE["moe"].argv(Context("cuda", 1, str(tmp_path), 150))
    cpu = STAGE["moe"].argv(Context("cpu", 1, str(tmp_path), 60))
    assert "model=deepseek_v3,qwen3_moe,gpt_oss" in gpu
    assert [a for a in gpu if a.startswith("model.size=")] == ["model.size=gpu1"]
    assert [a for a in cpu if a.startswith("model.size=")] == ["model.size=tiny"]
