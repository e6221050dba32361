"""A per-rank memory cap, so that running out of memory is reachable on a CPU.

Standard library only: this runs in the framework's Python."""
import ctypes
import resource


def limit_memory(mb):
    """Cap this rank's address space (RLIMIT_AS) at its size now plus `mb` MiB, so that
    running out of memory is reachable, and the same on every run, on a CPU. Returns the
    limits it replaced (None when mb is null). On a GPU leave it null: CUDA reserves far
    more address space than it uses."""
    if not mb:
        return None
    try:  # glibc: a fixed mmap threshold, so that a freed large block leaves at once and the
        libc = ctypes.CDLL(None)  # cap sees live memory, the same on every run; one arena, as
        libc.mallopt(-3, 65536)   # each thread's own reserves 64 MiB of address space
        libc.mallopt(-8, 1)       # (M_MMAP_THRESHOLD, M_ARENA_MAX; not glibc: no such call)
    except (OSError, AttributeError):
        pass
    old = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/status") as f:
        size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    cap = size + int(mb) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap if old[1] == resource.RLIM_INFINITY
                                            else min(cap, old[1]), old[1]))
    return old


def capped() -> bool:
    """Whether this process runs under a cap on its address space (limit_memory's, or one it
    inherited): an allocation a library could not make may then be the cap's."""
    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY


def restore(limits) -> None:
    """Lift the cap again (so that the record can still be written)."""
    if limits is not None:
        resource.setrlimit(resource.RLIMIT_AS, limits)
