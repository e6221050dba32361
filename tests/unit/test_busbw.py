"""The nccl-tests arithmetic (contract/busbw.py) against hand-computed figures,
and the correctness check of the comm bench (frameworks/pytorch/comm.py) against a
collective simulated in plain Python."""
import pytest
import torch

from contract import busbw
from frameworks.pytorch import comm
from tests.runspecs import run_spec

GiB = 1 << 30


def test_all_reduce_1gib_in_100ms_on_8_ranks():
    # algbw = 2^30 B / 0.1 s = 10.737 GB/s; busbw = algbw * 2 * 7 / 8 = 18.79 GB/s
    assert busbw.algbw_gbps(GiB, 0.1) == pytest.approx(10.737, abs=1e-3)
    assert busbw.busbw_gbps("all_reduce", GiB, 0.1, 8) == pytest.approx(18.79, abs=1e-2)


@pytest.mark.parametrize("op, n, factor", [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 1, 0.0),
    ("all_gather", 8, 7 / 8), ("reduce_scatter", 4, 3 / 4), ("all_to_all", 2, 0.5),
    ("broadcast", 8, 1.0), ("reduce", 8, 1.0)])
def test_bus_factors(op, n, factor):
    assert busbw.bus_factor(op, n) == pytest.approx(factor)


def test_one_rank_moves_nothing():
    # nccl-tests' busbw of one rank is 0 and its algbw a local copy's: the suite shows neither
    assert not busbw.moves(1) and busbw.moves(2)
    with pytest.raises(ValueError, match="needs two ranks or more: a collective of 1 rank moves nothing"):
        comm.options(run_spec(bench_options={"min_busbw": 10}), 1)
    assert comm.options(run_spec(bench_options={"min_busbw": 10}), 2)["min_busbw"] == 10


def test_all_gather_busbw_by_hand():
    # 256 MiB gathered on 4 ranks in 20 ms: algbw 13.422 GB/s, busbw 3/4 of it = 10.066
    assert busbw.algbw_gbps(256 << 20, 0.02) == pytest.approx(13.422, abs=1e-3)
    assert busbw.busbw_gbps("all_gather", 256 << 20, 0.02, 4) == pytest.approx(10.066, abs=1e-3)


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown collective"):
        busbw.bus_factor("gossip", 2)
    with pytest.raises(ValueError, match="positive"):
        busbw.algbw_gbps(1024, 0.0)
    with pytest.raises(ValueError):
        busbw.avg_busbw([])


def test_sizes_from_min_to_max_by_factor():
    s = busbw.sizes(1 << 20, GiB, 2)
    assert len(s) == 11 and s[0] == 1 << 20 and s[-1] == GiB
    assert all(b == 2 * a for a, b in zip(s, s[1:]))
    assert busbw.sizes("1M", "1G", 2) == s
    assert busbw.sizes(1024, 5000, 2) == [1024, 2048, 4096]  # max not reached: stop below it
    assert busbw.sizes(8, 8 * 64, 4) == [8, 32, 128, 512]
    for bad in [(0, 8, 2), (16, 8, 2), (8, 16, 1), (8, 16, 1.5)]:
        with pytest.raises(ValueError):
            busbw.sizes(*bad)
    assert busbw.parse_bytes("64K") == 65536 and busbw.parse_bytes("2MiB") == 2 << 20
    with pytest.raises(ValueError):
        busbw.parse_bytes("lots")


def test_element_count_whole_chunks():
    assert busbw.element_count("all_reduce", 1 << 20, 4, 3) == 262144
    assert busbw.element_count("all_gather", 1 << 20, 4, 3) == 262143  # a multiple of 3
    assert busbw.element_count("all_to_all", 8, 4, 3) == 0  # too small for one element per rank


def test_avg_busbw_is_the_plain_mean():
    assert busbw.avg_busbw([1.0, 2.0, 6.0]) == pytest.approx(3.0)


# ---- the correctness check --------------------------------------------------------------

def simulate(op, n, count, root=0, shares=None):
    """Every rank's correct output, computed in plain Python from comm.pattern's inputs."""
    per = count // n
    if op == "all_to_allv":   # sender j's segment for rank r: the same place in every sender
        splits = busbw.uneven_splits(count, shares or [1 / n] * n)
        starts = [sum(splits[:r]) for r in range(n)]
        return [[int(v) for j in range(n) for v in comm.pattern(j, torch.arange(starts[r], starts[r] + splits[r]))]
                for r in range(n)]
    x = [[int(v) for v in comm.pattern(r, torch.arange(count))] for r in range(n)]
    total = [sum(x[r][i] for r in range(n)) for i in range(count)]
    if op == "all_reduce":
        return [total] * n
    if op == "reduce":
        return [total if r == root else None for r in range(n)]
    if op == "broadcast":
        return [x[root]] * n
    if op == "all_gather":  # each rank contributes the first `per` elements of its pattern
        return [[x[j][k] for j in range(n) for k in range(per)]] * n
    if op == "reduce_scatter":
        return [total[r * per:(r + 1) * per] for r in range(n)]
    if op == "all_to_all":
        return [[x[j][r * per + k] for j in range(n) for k in range(per)] for r in range(n)]
    raise ValueError(op)


@pytest.mark.parametrize("op", busbw.OPS)
@pytest.mark.parametrize("n", [1, 3, 4])
def test_expected_values_match_a_simulated_collective(op, n):
    count = 12 * 13  # a multiple of every n, and of the pattern's periods
    want = simulate(op, n, count)
    for rank in range(n):
        size = count // n if op == "reduce_scatter" else count
        got = comm.expected(op, rank, n, count, torch.arange(size))
        if want[rank] is None:
            assert got is None
        else:
            assert got.tolist() == want[rank]


def test_uneven_all_to_all_of_a_skewed_routing_by_hand():
    # 4 experts, Zipf skew 1: popularity ranks 1..4 get 1, 1/2, 1/3, 1/4; seed 0 deals them to
    # experts 2, 0, 1, 3 (random.Random(0)'s shuffle of 0..3): loads 1/2, 1/3, 1, 1/4
    assert busbw.expert_loads(4, 1.0, seed=0) == pytest.approx([1 / 2, 1 / 3, 1, 1 / 4])
    # 2 ranks: experts 0, 1 on rank 0 (5/6), 2, 3 on rank 1 (5/4) of 25/12: 0.4 and 0.6
    assert busbw.rank_shares([1 / 2, 1 / 3, 1, 1 / 4], 2) == pytest.approx([0.4, 0.6])
    assert busbw.rank_shares([1, 1, 1, 1, 4, 4, 0, 0], 4) == pytest.approx([2 / 12, 2 / 12, 8 / 12, 0])
    # 1000 elements by shares 0.4, 0.6 -> 400, 600; by thirds -> 334, 333, 333 (largest remainder)
    assert busbw.uneven_splits(1000, [0.4, 0.6]) == [400, 600]
    assert busbw.uneven_splits(1000, [1 / 3] * 3) == [334, 333, 333]
    assert busbw.receive_imbalance(1000, [0.4, 0.6]) == pytest.approx(1.2)   # 2 x 600 / 1000
    assert busbw.expert_loads(3, 0.0) == [1.0, 1.0, 1.0]                     # skew 0: even
    assert busbw.bus_factor("all_to_allv", 4) == busbw.bus_factor("all_to_all", 4) == 0.75
    with pytest.raises(ValueError, match="skew must be a number >= 0"):
        busbw.expert_loads(4, -1)
    with pytest.raises(ValueError, match="not all 0"):
        busbw.rank_shares([0, 0], 2)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_uneven_all_to_all_expected_values(n):
    shares = busbw.rank_shares(busbw.expert_loads(16, 1.2, seed=3), n)
    count = 12 * 13
    want = simulate("all_to_allv", n, count, shares=shares)
    for rank in range(n):
        size = n * busbw.uneven_splits(count, shares)[rank]
        got = comm.expected("all_to_allv", rank, n, count, torch.arange(size), shares=shares)
        assert got.tolist() == want[rank]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_wrong_count_catches_a_perturbed_array(dtype):
    n, count = 4, 1000
    out = comm.expected("all_reduce", 1, n, count, torch.arange(count)).to(comm.DTYPES[dtype])
    assert comm.wrong_elements("all_reduce", out, 1, n, count) == 0
    out[[3, 500, 999]] += 1
    assert comm.wrong_elements("all_reduce", out, 1, n, count) == 3
    # a gather with two ranks' chunks swapped is wrong in every element that differs
    g = comm.expected("all_gather", 0, 2, 8, torch.arange(8)).to(torch.float32)
    assert comm.wrong_elements("all_gather", torch.cat([g[4:], g[:4]]), 0, 2, 8) == 8


def test_gate_messages():
    rows = [{"op": "all_reduce", "bytes": b, "inplace": True, "busbw_gbps": bw, "wrong": 0}
            for b, bw in [(1 << 20, 1.0), (2 << 20, 1.4)]]
    assert comm.gate(rows, None) == [] and comm.gate(rows, 1.2) == []
    (msg,) = comm.gate(rows, 5.0)
    assert msg.startswith("average bus bandwidth 1.2 GB/s below min_busbw 5.0 for all_reduce")
    rows[1]["wrong"] = 7
    (msg,) = comm.gate(rows, None)
    assert "7 wrong elements" in msg and "at 2097152 bytes" in msg


def test_options_defaults_and_validation():
    o = comm.options(run_spec(bench_options={"name": "comm", "max_bytes": "4M", "inplace": True}), 2)
    assert o["sizes"] == [1 << 20, 2 << 20, 4 << 20] and o["inplace"] == [True]
    assert o["ops"] == list(busbw.OPS)
    with pytest.raises(ValueError, match="bench.ops"):
        comm.options(run_spec(bench_options={"ops": ["all_reduce", "gossip"]}), 2)
    with pytest.raises(ValueError, match="bench.dtype"):
        comm.options(run_spec(bench_options={"dtype": "float8"}), 2)
    with pytest.raises(ValueError, match="bench.root"):
        comm.options(run_spec(bench_options={"root": 2}), 2)
