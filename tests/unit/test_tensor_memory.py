"""The peak of live tensor bytes (frameworks/pytorch/layouts/tensor_memory.py), against figures
computed by hand: 1000 float32 values are 4000 bytes."""
import threading

import pytest

torch = pytest.importorskip("torch")

from frameworks.pytorch.layouts.tensor_memory import LiveTensors, peak_of  # noqa: E402

N = 4000  # bytes of torch.ones(1000)


def test_what_each_operator_makes_counts_until_it_is_freed():
    kept = torch.ones(1000)             # alive before: in the census
    with LiveTensors() as live:
        base = live.now
        a = kept * 2                    # + N
        b = a + 1                       # + N: peak, 2 N above the start
        del a                           # - N
        c = b.sum()                     # + 4 bytes
        view = b[10:]                   # a view: nothing new
        b.add_(1)                       # in place: nothing new
        assert live.now - base == N + 4
    assert live.peak - base == 2 * N
    assert base >= N                    # `kept` was counted
    del view, c, b


def test_the_census_counts_what_is_alive_and_its_frees():
    kept = [torch.ones(1000) for _ in range(3)]
    with LiveTensors() as live:
        start = live.now
        kept.pop()                       # a tensor from before, freed
        assert start - live.now == N
        fresh = torch.ones(1000)
        assert live.now == start         # the peak stayed at the start
    assert live.peak == start
    del fresh


def test_a_storage_resized_as_fsdp_frees_and_gathers_it():
    t = torch.ones(1000)
    storage, original = t.untyped_storage(), torch.UntypedStorage.resize_
    with LiveTensors() as live:
        base = live.now
        storage.resize_(0)               # FSDP2 frees a gathered parameter this way
        assert live.now == base - N
        storage.resize_(2 * N)           # and gathers it again (here twice the size)
        assert live.now == base + N
    assert live.peak == base + N
    assert torch.UntypedStorage.resize_ is original    # put back on leaving


def test_a_free_on_another_thread_counts():
    with LiveTensors() as live:
        base = live.now
        box = [torch.ones(1000)]
        thread = threading.Thread(target=box.clear)   # gloo's threads free tensors too
        thread.start()
        thread.join()
        assert live.now == base
    assert live.peak == base + N


def test_peak_of_a_step_and_other_devices_left_out():
    def step():
        x = torch.ones(1000)
        torch.ones(10**6, device="meta") * 2   # not on the CPU: not counted
        return x + 1

    with LiveTensors() as live:
        base = live.now
    assert peak_of(step) - base == 2 * N


def test_a_dtensor_counts_as_its_local_part():
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        d = distribute_tensor(torch.ones(1000), init_device_mesh("cpu", (1,)), [Shard(0)])
        with LiveTensors() as live:
            base = live.now
            e = d * 2                    # the wrapper holds nothing; its local result N
            assert live.now - base == N
        del e
    finally:
        dist.destroy_process_group()
