"""The row-sharded embedding (frameworks/pytorch/layouts/sharded_embedding.py): the partition rule
by hand, a shard's rows equal to the full table's, and lookups and gradients on 2 gloo
processes equal to one unsharded table's."""
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from frameworks.pytorch.layouts.sharded_embedding import (RowShardedEmbedding, init_rows, owner,
                                                  shard_rows, shard_starts)
from frameworks.pytorch.models.wide_deep import WideDeep


def test_rows_per_rank_and_owner_by_hand():
    # 10 rows over 3 ranks: 10 = 3 x 3 + 1, so rank 0 holds one row more: 0-3, 4-6, 7-9
    assert [shard_rows(10, 3, r) for r in range(3)] == [(0, 4), (4, 3), (7, 3)]
    assert shard_starts(10, 3) == [0, 4, 7]
    ids = torch.tensor([0, 3, 4, 6, 7, 9])
    assert owner(ids, 10, 3).tolist() == [0, 0, 1, 1, 2, 2]
    # 3,200,000 rows over 3 ranks: 1,066,667 + 1,066,667 + 1,066,666, each about 1/3
    spans = [shard_rows(3_200_000, 3, r) for r in range(3)]
    assert spans == [(0, 1_066_667), (1_066_667, 1_066_667), (2_133_334, 1_066_666)]
    assert owner(torch.tensor([1_066_666, 1_066_667, 2_133_334, 3_199_999]), 3_200_000, 3).tolist() \
        == [0, 1, 2, 2]
    assert shard_rows(5, 1, 0) == (0, 5)
    with pytest.raises(ValueError, match="cannot be split over 3 ranks"):
        RowShardedEmbedding(2, 4, rank=0, world=3)


@pytest.mark.parametrize("world", [2, 3])
def test_each_shard_holds_its_share_of_the_full_tables_rows(world):
    full = torch.empty(23, 4)
    init_rows(full, 0, 23, seed=11, low=-0.05, high=0.05, block_rows=5)  # shards cut blocks
    parts = []
    for rank in range(world):
        first, rows = shard_rows(23, world, rank)
        part = torch.empty(rows, 4)
        init_rows(part, first, 23, seed=11, low=-0.05, high=0.05, block_rows=5)
        assert abs(rows - 23 / world) < 1
        parts.append(part)
    assert torch.equal(torch.cat(parts), full)
    assert full.abs().max() <= 0.05 and len(set(full[:, 0].tolist())) == 23


def test_wide_deep_shards_start_from_the_unsharded_model():
    sizes = dict(deep_vocab_size=50, wide_vocab_size=20, deep_embedding_size=4, hidden_units=8,
                 hidden_layers=2, dense_fields=3, sparse_fields=2, dropout=0.0)
    torch.manual_seed(5)
    whole = WideDeep(**sizes)
    for rank in range(3):
        torch.manual_seed(5)
        part = WideDeep(**sizes, rank=rank, world=3)
        for name in ("deep", "wide"):
            table, shard = getattr(whole, name), getattr(part, name)
            assert shard.weight.shape[0] == shard_rows(table.num_rows, 3, rank)[1]
            assert torch.equal(shard.weight, table.weight[shard.first:shard.first + shard.weight.shape[0]])
        for a, b in zip(whole.mlp.parameters(), part.mlp.parameters()):
            assert torch.equal(a, b)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lookup_rank(rank, world, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
    try:
        full = RowShardedEmbedding(11, 3, seed=7)
        mine = RowShardedEmbedding(11, 3, rank, world, seed=7)
        # 11 rows: rank 0 holds 0-5, rank 1 6-10; rank 1 asks nothing of rank 0 (an empty
        # exchange), rank 0 asks row 5 twice and rank 1's rows too
        ids = [torch.tensor([[0, 5], [10, 5]]), torch.tensor([[6, 9], [7, 7]])]
        out = mine(ids[rank])
        assert torch.equal(out, full(ids[rank]))
        (out * torch.arange(1.0, 4.0)).sum().backward()
        # the mean over ranks of every rank's loss, on one unsharded table
        (sum((full(i) * torch.arange(1.0, 4.0)).sum() for i in ids) / world).backward()
        expect = full.weight.grad[mine.first:mine.first + mine.weight.shape[0]]
        assert torch.allclose(mine.weight.grad, expect), (mine.weight.grad, expect)
    finally:
        dist.barrier()
        dist.destroy_process_group()


def test_lookups_and_gradients_on_two_ranks_equal_one_table():
    mp.spawn(_lookup_rank, args=(2, _free_port()), nprocs=2)  # a rank's failure raises here
