"""The port rule (launchers/backends/ports.py): one block of world_size + 2 ports per repeat."""
import socket

from launchers.backends import ports


def test_a_block_is_world_size_plus_two_ports_inside_the_range():
    for world in (1, 2, 9, 64, 1024):
        for slot in (0, 1, ports.slots(world) - 1, ports.slots(world)):
            b = ports.block(slot, world)
            assert len(b) == world + 2 and ports.LOW <= b.start and b.stop <= ports.HIGH


def test_neighbouring_jobs_of_64_ranks_never_share_a_port():
    # TensorFlow and Paddle listen on MASTER_PORT + 1 + rank: 65 ports above MASTER_PORT
    used = [set(ports.block(job, 64)) for job in range(ports.slots(64))]
    assert all(not (a & b) for i, a in enumerate(used) for b in used[i + 1:])
    assert ports.slots(64) == 12000 // 66


def test_a_busy_port_moves_the_repeat_to_the_next_free_block():
    busy = set(ports.block(5, 64))
    assert ports.free_block(64, 5, free=lambda p: p not in busy) == ports.block(6, 64).start
    assert ports.free_block(64, 4, free=lambda p: p not in busy) == ports.block(4, 64).start


def test_a_port_bound_here_is_not_free():
    with socket.socket() as s:
        s.bind(("", 0))
        assert not ports.is_free(s.getsockname()[1])
