"""What a rank ran on, machine-readable, for its record's metadata.

Environment variables are captured by an allowlist of prefixes, never wholesale, and
never one the secret rule names (contract/secrets.py), so no token or password in a user's
environment reaches a record. Standard library only: this runs in the framework's Python.
"""
import os
import platform
import shutil
import socket
import subprocess
import sys

from contract import secrets

ENV_ALLOWLIST = ("NCCL_", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                 "SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_STEP_ID", "SLURM_NNODES",
                 "SLURM_NTASKS", "SLURM_CPUS_PER_TASK", "SLURM_CLUSTER_NAME",
                 "SLURM_JOB_PARTITION", "UCX_", "XLA_FLAGS", "TF_XLA_FLAGS", "TF_ENABLE_",
                 "TF_GPU_", "FLAGS_", "GLOO_", "JAX_", "MS_", "ONEFLOW_", "MXNET_")


def allowed_env(env=None) -> dict:
    """The allowed variables, less any the secret rule names (a hypothetical NCCL_..._TOKEN)."""
    env = os.environ if env is None else env
    return {k: v for k, v in sorted(env.items())
            if k.startswith(ENV_ALLOWLIST) and not secrets.is_secret_key(k)}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _run(argv, timeout=10):
    """A tool's output, or None where the tool is absent or fails."""
    if not shutil.which(argv[0]):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def nvidia_driver():
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return out.splitlines()[0] if out else None


def infiniband_devices():
    try:
        return sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        return []


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def infiniband_ports(root="/sys/class/infiniband"):
    """Each InfiniBand port's state, rate and link layer (InfiniBand or Ethernet/RoCE)."""
    ports = []
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return []
    for dev in devices:
        try:
            numbers = sorted(os.listdir(f"{root}/{dev}/ports"))
        except OSError:
            continue
        for n in numbers:
            base = f"{root}/{dev}/ports/{n}"
            ports.append({"device": dev, "port": n, "state": _read(f"{base}/state"),
                          "rate": _read(f"{base}/rate"), "link_layer": _read(f"{base}/link_layer")})
    return ports


def gpus():
    """The node's GPUs as the driver sees them, whatever the framework: [{name, memory}]."""
    out = _run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"])
    return [dict(zip(("name", "memory"), (c.strip() for c in line.split(",", 1))))
            for line in out.splitlines()] if out else []


def memory_bytes():
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return None


def capture(topology: bool = False) -> dict:
    """Host-level facts; frameworks add device and library versions beside these."""
    facts = {
        "host": socket.gethostname(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,  # the image's own, in a container
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "nvidia_driver": nvidia_driver(),
        "gpus": gpus(),
        "infiniband": infiniband_devices(),
        "infiniband_ports": infiniband_ports(),
        "env": allowed_env(),
    }
    if topology:  # one rank per node is enough for `nvidia-smi topo -m`
        facts["gpu_topology"] = _run(["nvidia-smi", "topo", "-m"])
    return facts


def peak_host_bytes() -> int:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
