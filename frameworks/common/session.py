"""The session interface: what a framework adapter's session provides (docs/contract.md).

A framework declares its sessions in its adapter (frameworks/registry.py); each subclasses
Session, built as `session(spec, dist)` from the typed run spec (contract/spec.py), and the
harness (frameworks/common/harness.py) runs its timed loop on it. Every hook has a default
(a CPU one where it is a device's). A framework's own objects (its loss tensor, its device)
stay inside its session: the hooks hand the harness numbers, strings and JSON. Standard
library and contract/ only: this runs in the framework's Python, and the harness, the
adapters and the modules they call all import it.
"""
import time
from typing import Any, Protocol, SupportsFloat

from contract.records import Record
from contract.spec import RunSpec

# A JSON object of the record (`environment`, `step_sync`, `parallel`, `data`): its values are
# any JSON, so Any (contract/records.py's Record is the same).
Json = dict[str, Any]


class StepTimer(Protocol):
    """A timed window's step edges: `begin(i)` and `end(i)` around each timed step, `read`
    after the window's sync. A timer whose ends are a device's (not the host's) also sets
    `device_ends = True` (PyTorch's CudaTimer): the harness then keeps beside each step the
    host's end of enqueuing it."""

    def begin(self, i: int) -> None: ...

    def end(self, i: int) -> None: ...

    def read(self, window_start: float, origin: float) -> list[tuple[float, float]]:
        """Each timed step's (start, end), seconds since `origin`."""
        ...


class HostTimer:
    """Step edges on the host clock; right when a step returns after its work."""

    device_ends = False   # a step's end is the host's (a device timer's: the device's own)

    def __init__(self) -> None:
        self.edges: list[tuple[float, float]] = []
        self._start = 0.0

    def begin(self, i: int) -> None:
        self._start = time.perf_counter()

    def end(self, i: int) -> None:
        self.edges.append((self._start, time.perf_counter()))

    def read(self, window_start: float, origin: float) -> list[tuple[float, float]]:
        return [(s - origin, e - origin) for s, e in self.edges]


class Session:
    """What a framework adapter provides: every hook the harness calls, each with a default
    (a CPU one where it is a device's). A hook without a body has nothing to add by default."""

    framework_version: str | None = None
    # The samples this rank counts per step; None: the spec's batch_size. A rank of a layout
    # that splits one model counts its share of the global batch (frameworks/pytorch/).
    samples_per_step: int | None = None

    def step(self) -> SupportsFloat:
        """One training step on the synthetic batch; returns a loss handle (the framework's
        loss, not read inside the timed window: `loss_value` reads it after)."""
        raise NotImplementedError

    def loss_value(self, handle: SupportsFloat) -> float:
        return float(handle)

    def sync(self) -> None:
        """Wait for queued device work (no-op on CPU)."""

    def barrier(self) -> None:
        """Wait for every rank (no-op for one rank)."""

    def timer(self) -> StepTimer:
        return HostTimer()

    def step_syncs(self) -> Json | None:
        """Whether one training step waits on the device, asked once after warm-up: a dict
        for the record's `step_sync` ({syncs: bool or None, ...}), or None where there is no
        device apart from the host to wait on (a CPU) or no way to ask (docs/anatomy.md)."""
        return None

    def environment(self) -> Json:
        """Device and library versions: device, device_count, cuda, cudnn, nccl..."""
        return {}

    def nvml_device(self) -> str | None:
        """This rank's GPU as NVML finds it, for the window's energy (common/nvml_energy.py):
        its PCI bus id ("0000:3b:00.0") or UUID ("GPU-..."); None where the rank trains on a
        CPU. An adapter that cannot say leaves this default: the energy is null, saying so."""
        raise NotImplementedError

    def peak_device_bytes(self) -> int | None:
        """The device allocator's peak of allocated bytes (since `reset_peak_device_bytes`),
        or None (a CPU)."""
        return None

    def reset_peak_device_bytes(self) -> bool:
        """Start the device's peak afresh, at the timed window's start; True where the
        framework can, so that the record's peak is the window's (docs/contract.md)."""
        return False

    @staticmethod
    def is_oom(exc: BaseException) -> bool:
        """Whether exc is the framework's out-of-memory. Static: the adapter declares it as
        the framework's rule (`oom`), asked also when the constructor ran out of memory."""
        return isinstance(exc, MemoryError)

    def parallel_record(self) -> Json | None:
        """The record's `parallel` (a layout's grid place and parameter counts), or None
        where the session splits no model (the record then has no such field)."""
        return None

    def run_bench(self, spec: RunSpec, record: Record, origin: float) -> None:
        """The measuring loop of a bench other than training (bench=comm, bench=checkpoint),
        which overrides this. A session that keeps this default trains: the harness runs its
        training steps (harness.run_steps; the harness imports this module, not back)."""
        raise NotImplementedError

    def after_window(self, record: Record) -> None:
        """Figures measured after the timed window, untimed (a pipeline's bubble)."""

    def parameter_checksum(self) -> float | str | None:
        """A checksum of the trained parameters, a number or a string, or None where the
        adapter has none. The harness asks once, after the timed loop has ended ok, and
        records the answer as `parameter_checksum`: equal on every rank of a data-parallel
        run, it shows that the ranks' updates were all-reduced."""
        return None

    def data_record(self) -> Json:
        """What the rank read, for the record's `data` (data=files: the sample ids)."""
        return {}

    def close(self) -> None:
        """Release the process group and device memory."""

