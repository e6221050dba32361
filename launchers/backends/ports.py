"""The port rule, written once: which ports one repeat's ranks may use.

A repeat owns MASTER_PORT .. MASTER_PORT + span(world_size) - 1 on its first node:
MASTER_PORT for the rendezvous, +1 for JAX's coordinator, MXNet's scheduler and Paddle's
master, +1+rank for TensorFlow's and Paddle's workers, and one spare (docs/contract.md).
Blocks are aligned to the span inside 20000..31999, below Linux's ephemeral range, so two
jobs of the same world size that start from neighbouring slots never share a port. The block
taken is the preferred one where its every port is free now (a port in TIME_WAIT from the
previous repeat is not), else the first free one scanning on from a random slot: never from
the next slot, which is the next job's preferred block. Two drivers on one node choose before
either's ranks bind, so a job pushed onto its neighbour's block would take the port that
neighbour is about to take (EADDRINUSE at its rendezvous).
"""
import random
import socket

LOW, HIGH = 20000, 32000


def span(world_size: int) -> int:
    return int(world_size) + 2


def slots(world_size: int) -> int:
    return (HIGH - LOW) // span(world_size)


def block(slot: int, world_size: int) -> range:
    """The ports of block number `slot` (taken modulo the number of blocks)."""
    start = LOW + (int(slot) % slots(world_size)) * span(world_size)
    return range(start, start + span(world_size))


def is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def free_block(world_size: int, preferred_slot=None, free=is_free) -> int:
    """MASTER_PORT of the block `preferred_slot` where its ports are all free, else of the
    first such block from a random slot on; raises OSError when there is none."""
    n = slots(world_size)
    if preferred_slot is not None and all(free(p) for p in block(preferred_slot, world_size)):
        return block(preferred_slot, world_size).start
    first = random.randrange(n)
    for k in range(n):
        ports = block(first + k, world_size)
        if all(free(p) for p in ports):
            return ports.start
    raise OSError(f"no block of {span(world_size)} free ports in {LOW}..{HIGH - 1}")
