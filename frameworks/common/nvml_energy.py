"""NVML's energy counter of this rank's GPU, read at the timed window's edges.

The harness makes a Meter before the window's opening sync (loading NVML and finding the
device costs the window nothing), reads the counter right before the window's clock starts
(`begin`) and right after its closing sync (`end`), and records what contract/energy.py
makes of the two readings. The device is the one the adapter names (`Session.nvml_device`:
its PCI bus id, or a UUID "GPU-..."), never an index: NVML numbers the node's devices, CUDA
the visible ones (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), and the two orders differ.

NVML through ctypes on libnvidia-ml.so.1 (the driver's library, present wherever a GPU is,
inside a container too when the runtime mounts it), since the rank runs in the framework's
Python with the standard library only: nvidia-ml-py may not be there. Whatever fails (no
library, no device, a GPU without the counter, no permission) leaves the energy null with
NVML's reason, never the record. Runs on a GPU for the first time on the next lent machine:
on this CPU-only machine only its failures are tested (tests/unit/test_energy.py).
"""
import ctypes

from contract import energy

LIBRARY = "libnvidia-ml.so.1"


def nvml_id(props) -> str:
    """A CUDA device's name for NVML from its properties as torch gives them: its PCI address
    "0000:3b:00.0" (domain:bus:device.function, a GPU's function 0, as torch's own NUMA binding
    writes it), else, where they carry no PCI ids, "GPU-<uuid>"."""
    if hasattr(props, "pci_bus_id"):
        return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    return f"GPU-{props.uuid}"


class Unreadable(Exception):
    """Why the counter cannot be read here."""


class Nvml:
    """One device's energy counter through NVML's C library (ctypes)."""

    def __init__(self, device: str, library: str = LIBRARY):
        try:
            self.lib = ctypes.CDLL(library)
        except OSError as exc:
            raise Unreadable(f"NVML's library {library} cannot be loaded ({exc})") from None
        self._call("nvmlInit_v2")
        self.handle = ctypes.c_void_p()
        find = "nvmlDeviceGetHandleByUUID" if device.startswith(("GPU-", "MIG-")) \
            else "nvmlDeviceGetHandleByPciBusId_v2"
        try:
            self._call(find, device.encode(), ctypes.byref(self.handle))
        except Unreadable:
            self.close()
            raise

    def _call(self, name: str, *args) -> None:
        try:
            fn = getattr(self.lib, name)
        except AttributeError:
            raise Unreadable(f"NVML's library has no {name} (a driver too old?)") from None
        rc = fn(*args)
        if rc != 0:
            raise Unreadable(f"NVML {name}: {self._error(rc)}")

    def _error(self, rc: int) -> str:
        try:
            text = self.lib.nvmlErrorString
            text.restype = ctypes.c_char_p
            return f"{text(rc).decode()} (error {rc})"
        except (AttributeError, UnicodeDecodeError):
            return f"error {rc}"

    def read_mj(self) -> int:
        """The device's energy since the driver loaded, in millijoules."""
        mj = ctypes.c_ulonglong()
        self._call("nvmlDeviceGetTotalEnergyConsumption", self.handle, ctypes.byref(mj))
        return mj.value

    def close(self) -> None:
        try:
            self.lib.nvmlShutdown()
        except AttributeError:
            pass


class Meter:
    """The timed window's energy of one rank: `begin` and `end` at the window's edges; every
    failure becomes the record's reason."""

    def __init__(self, session, library: str = LIBRARY):
        self.device = self.nvml = self.start_mj = None
        self.reason = None
        try:
            self.device = session.nvml_device()
        except NotImplementedError:
            self.reason = f"the adapter names no GPU to NVML ({type(session).__name__}.nvml_device)"
            return
        except Exception as exc:  # noqa: BLE001  (a reason, never the run)
            self.reason = f"this rank's GPU cannot be named: {type(exc).__name__}: {exc}"
            return
        if self.device is None:
            self.reason = "no NVML device: cpu"
            return
        try:
            self.nvml = Nvml(self.device, library)
        except Unreadable as exc:
            self.reason = str(exc)

    def _read(self):
        try:
            return self.nvml.read_mj()
        except Unreadable as exc:
            self.reason = str(exc)
            return None

    def begin(self) -> None:
        """The counter at the window's start (right before its clock starts)."""
        if self.nvml is not None:
            self.start_mj = self._read()

    def end(self, window_s: float) -> dict:
        """The record's `energy` (contract/energy.py), read right after the window's closing sync."""
        if self.nvml is None:
            return energy.unread(self.reason, self.device)
        end_mj = None if self.start_mj is None else self._read()
        self.nvml.close()
        if end_mj is None:
            return energy.unread(self.reason, self.device)
        return energy.rank_window(self.start_mj, end_mj, window_s, self.device)
