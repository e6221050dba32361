"""The port rule (launchers/backends/ports.py): one block of world_size + 2 ports per repeat."""
import socket

import pytest

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


def test_a_busy_port_moves_the_repeat_to_a_free_block_drawn_at_random():
    """Not to the next block: that is the next job's own, chosen by its driver at the same
    time (two points of a sweep on one first node: EADDRINUSE at one's rendezvous)."""
    busy = set(ports.block(5, 64))
    free = lambda p: p not in busy   # noqa: E731
    assert ports.free_block(64, 4, free=free) == ports.block(4, 64).start
    taken = {ports.free_block(64, 5, free=free) for _ in range(200)}
    assert ports.block(5, 64).start not in taken and len(taken) > 20
    assert all((p - ports.LOW) % ports.span(64) == 0 for p in taken)
    # one free block left: found wherever the draw starts
    only = ports.block(77, 64)
    assert {ports.free_block(64, 5, free=lambda p: p in only) for _ in range(20)} == {only.start}


def test_no_free_block_is_one_error():
    with pytest.raises(OSError, match="no block of 66 free ports in 20000..31999"):
        ports.free_block(64, 5, free=lambda p: False)


def test_a_port_bound_here_is_not_free():
    with socket.socket() as s:
        s.bind(("", 0))
        assert not ports.is_free(s.getsockname()[1])
