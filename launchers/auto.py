"""launcher=auto (the default): Slurm where this is a Slurm login node whose controller
answers, the local launcher otherwise.

submitit's AutoExecutor picks Slurm where `srun` is on PATH (SlurmExecutor.affinity()).
A machine with Slurm's packages but no cluster (CI, a laptop with slurm-client) would then
submit to nothing, so auto also asks for `sbatch` and for the controller itself:
`scontrol ping`, given at most PING_S. A SLURM_CONF naming no file is refused at once
(Slurm's clients would retry reading it for a minute). Decided once per process.

device=auto, for what the launcher decides of it (`on_cpu`: the local forkserver, the CPU
estimate): a GPU where this machine's NVIDIA driver lists one; each rank decides for itself
what it trains on (frameworks/common/accelerator.py).
"""
import functools
import os
import shutil
import subprocess

PING_S = 5


@functools.lru_cache(maxsize=1)
def choose() -> tuple:
    """(launcher name, why), e.g. ("local", "no sbatch on PATH")."""
    from submitit import SlurmExecutor
    if SlurmExecutor.affinity() <= 0:
        return "local", "no srun on PATH"
    if shutil.which("sbatch") is None:
        return "local", "no sbatch on PATH"
    conf = os.environ.get("SLURM_CONF")
    if conf and not os.path.isfile(conf):
        return "local", f"SLURM_CONF={conf} is not a file"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=PING_S)
    except subprocess.TimeoutExpired:
        return "local", f"the Slurm controller did not answer `scontrol ping` within {PING_S} s"
    except OSError as exc:
        return "local", f"scontrol: {exc.strerror or exc}"
    lines = [line.strip() for line in (ping.stdout + ping.stderr).splitlines() if line.strip()]
    up = [line for line in lines if line.endswith(" is UP")]
    if ping.returncode != 0 or not up:
        last = lines[-1] if lines else f"exit status {ping.returncode}"
        return "local", f"no Slurm controller answers `scontrol ping`: {last}"
    return "slurm", f"sbatch on PATH, `scontrol ping`: {up[0]}"


def say() -> str:
    name, why = choose()
    return f"launcher=auto: {name} ({why})"


@functools.lru_cache(maxsize=1)
def announce() -> None:
    """Print the choice, once per process (a sweep under Hydra's basic launcher runs many
    points in one process)."""
    print(say(), flush=True)


def gpu_visible() -> bool:
    """Whether this machine has an NVIDIA GPU (its driver lists one)."""
    try:
        return bool(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return False


def on_cpu(point) -> bool:
    """Whether a local point's ranks train on this machine's CPU: device=cpu, or auto here
    where no GPU is."""
    return point.device == "cpu" or (point.device == "auto" and not gpu_visible())
