"""The peak of live tensor bytes on a CPU rank, as the CUDA allocator's max_memory_allocated
counts them on a GPU: what a layout holds, whatever the host's allocator does with it.

A CPU rank's peak RSS depends on glibc's malloc: once its mmap threshold has grown, a freed
large block stays in the heap, and FSDP frees a gathered block per layer, so the same layout
reads 0.69 or 1.04 of one rank's peak by the allocator's settings alone
(benchmarks/layout_memory.md). Fixing the threshold in every worker makes the RSS follow live
memory but costs every step 15-20% more CPU time (a large tensor's pages faulted in afresh
each time), which the throughput would carry; so the RSS stays as it is, and this counts
tensors instead.

`LiveTensors` counts, over one step: every tensor storage alive when it starts (a census of
the tensors the interpreter can reach: parameters, gradients, optimizer states, the batch,
FSDP's shards and buffers), and every storage an operator makes while it runs (a
TorchDispatchMode sees each operator's outputs, DTensor's local ones included), each counted
until the storage is freed (a weak reference's callback, on whatever thread frees it) and
resized as FSDP resizes its gathered parameters (UntypedStorage.resize_). Not counted:
buffers only C++ holds from before the step (DDP's gradient buckets) and a collective
library's own scratch memory on its threads; a compiled graph's buffers, which bypass the
dispatcher (LMSession leaves the figure out with compile=true).
Standard library + torch only.
"""
import gc
import threading
import weakref

import torch
from torch.distributed.tensor import DTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

_dispatch_keys, _PYTHON = torch._C._dispatch_keys, torch._C.DispatchKey.Python


class LiveTensors(TorchDispatchMode):
    """Live tensor bytes on one device type while active, and their peak (`peak`)."""

    def __init__(self, device_type: str = "cpu"):
        super().__init__()
        self.device_type = device_type
        self.now = self.peak = 0
        self._sizes: dict = {}    # storage's C++ address -> (its weak reference, bytes counted)
        self._lock = threading.RLock()   # frees arrive on other threads too (gloo's)
        self._resize = None

    def _count(self, tensor) -> None:
        if tensor.device.type != self.device_type or _dispatch_keys(tensor).has(_PYTHON):
            return      # a wrapper (DTensor) holds no memory of its own: its local tensor does
        try:
            storage = tensor.untyped_storage()
        except (NotImplementedError, RuntimeError):   # no storage: sparse, batched (vmap)
            return
        key = storage._cdata
        with self._lock:
            if key in self._sizes:
                return
            n = storage.nbytes()
            self._sizes[key] = (weakref.ref(storage, lambda _: self._freed(key)), n)
            self._add(n)

    def _add(self, n: int) -> None:
        self.now += n
        if self.now > self.peak:
            self.peak = self.now

    def _freed(self, key) -> None:
        with self._lock:
            entry = self._sizes.pop(key, None)
            if entry is not None:
                self.now -= entry[1]

    def _resized(self, storage, size) -> None:
        with self._lock:
            entry = self._sizes.get(storage._cdata)
            if entry is not None:
                self._sizes[storage._cdata] = (entry[0], size)
                self._add(size - entry[1])

    def __enter__(self):
        for obj in gc.get_objects():      # the census: every tensor alive now
            if issubclass(type(obj), torch.Tensor):   # (isinstance would ask deprecated proxies)
                self._count(obj)
        self.peak = self.now
        original, tracker = torch.UntypedStorage.resize_, self

        def resize_(storage, size):
            original(storage, size)
            tracker._resized(storage, storage.nbytes())

        self._resize = original
        torch.UntypedStorage.resize_ = resize_
        return super().__enter__()

    def __exit__(self, *exc):
        torch.UntypedStorage.resize_ = self._resize
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented    # a DTensor op first runs as its local tensors' ops (and
                                     # its sharding propagation's fake ones, counted nowhere)
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._count(t)
        return out


def peak_of(step, device_type: str = "cpu") -> int:
    """The peak of live tensor bytes on `device_type` while `step()` runs, counting from what
    is alive when it starts."""
    with LiveTensors(device_type) as live:
        step()
    return live.peak
