import pytest

from frameworks.common import distenv


def test_our_names_win():
    d = distenv.from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                          "MASTER_ADDR": "node1", "MASTER_PORT": "12345", "SLURM_PROCID": "0"})
    assert (d.rank, d.world_size, d.local_rank, d.node_rank, d.master_addr, d.master_port) == \
        (3, 4, 1, 1, "node1", 12345)


def test_slurm_variables_fill_in_under_srun():
    d = distenv.from_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_LOCALID": "1",
                          "SLURM_NTASKS_PER_NODE": "2(x3)", "MASTER_ADDR": "node1",
                          "MASTER_PORT": "20000"})
    assert (d.rank, d.world_size, d.local_rank, d.local_world_size, d.node_rank) == (5, 6, 1, 2, 2)
    assert d.distributed


def test_nothing_set_is_one_process():
    d = distenv.from_env({})
    assert (d.rank, d.world_size, d.distributed) == (0, 1, False)


def test_inconsistent_environment_is_refused():
    with pytest.raises(ValueError, match="inconsistent"):
        distenv.from_env({"RANK": "2", "WORLD_SIZE": "2"})
