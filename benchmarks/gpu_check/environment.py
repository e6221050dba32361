"""What a GPU check runs on, said first: the wheels it installed where the suite's Python needs
did not import (the lent machine's python3 has torch but not Hydra, submitit, ...: they come
as wheels in .whl/, `make gpu-wheels`), then Python, torch, CUDA and its devices, torchtitan
and whether it loads with this torch (frameworks/pytorch/titan/session.py: unavailable), and
whether the suite imports. Standard library only until the wheels are in place.
"""
import glob
import importlib
import importlib.util
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHEELS = os.environ.get("DLBENCH_WHEELS") or os.path.join(ROOT, ".whl")   # make gpu-wheels
# what the launcher, the analysis and the health checks import beyond torch and numpy
NEEDS = ("hydra", "omegaconf", "submitit", "pandas", "tabulate", "orjson", "sqlalchemy", "zstandard",
         "yaml", "markdown", "jinja2")


def missing() -> list:
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def install_wheels(site: str, say=print) -> None:
    """Where the suite's needs do not import and .whl/ (DLBENCH_WHEELS) holds wheels: install
    them into `site` (pip, no index, no dependencies) and put it first on this process's path
    and its children's (PYTHONPATH), before the repository."""
    absent = missing()
    wheels = sorted(glob.glob(os.path.join(WHEELS, "*.whl")))
    if not absent:
        say("wheels: not needed (the suite's needs import)")
        return
    if not wheels:
        say(f"wheels: none in {WHEELS} (make gpu-wheels), and {', '.join(absent)} do not import")
        return
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                          "--no-compile", "--disable-pip-version-check", "--upgrade", "--target", site,
                          *wheels], capture_output=True, text=True)
    tail = (res.stdout + res.stderr).strip().splitlines()[-2:]
    say(f"wheels: {len(wheels)} from {WHEELS} into {site}: "
        + ("installed" if res.returncode == 0 else f"pip failed ({' '.join(tail)})"))
    path = [site, ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(path))
    sys.path[:0] = [site]
    importlib.invalidate_caches()


def _line(what: str, fn) -> str:
    try:
        return f"{what}: {fn()}"
    except Exception as exc:  # noqa: BLE001 (the line says what failed)
        return f"{what}: FAILED ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"


def _torch() -> str:
    import torch
    if not torch.cuda.is_available():
        return f"{torch.__version__} (CUDA {torch.version.cuda}), no CUDA device"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    props = torch.cuda.get_device_properties(0)
    return (f"{torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, NCCL "
            f"{'.'.join(map(str, torch.cuda.nccl.version()))}; {len(names)} GPU: {names[0]} "
            f"({props.total_memory / 2**30:.0f} GiB, sm_{props.major}{props.minor})")


def _torchtitan() -> str:
    from frameworks.pytorch.models import deepseek_v3
    from frameworks.pytorch.titan import releases
    from frameworks.pytorch.titan import session as titan
    llama = titan.unavailable()
    moe = titan.unavailable(deepseek_v3)
    if llama is None and moe is None:
        release = releases.current()
        which = ("Llama 3 and the MoE models" if not release.families else
                 f"{' and '.join(release.families)} (the others: the suite's own definitions)")
        return f"{titan._version()} loads: {which} train through it on GPUs"
    return f"{llama or moe}: Llama 3 and the MoE models train the suite's own definitions on GPUs"


def _suite() -> str:
    for name in ("launch", "analysis", "launchers.plan.sweep", "frameworks.pytorch.session",
                 "healthchecks.nodechecks"):
        importlib.import_module(name)
    return "ok (launch, analysis, frameworks.pytorch, healthchecks)"


def report(say=print) -> bool:
    """The first lines (module docstring); True where the suite imports."""
    say(f"python: {platform.python_version()} ({sys.executable})")
    say(_line("torch", _torch))
    say(_line("torchtitan", _torchtitan))
    suite = _line("suite imports", _suite)
    say(suite)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm,"
                              "power.limit", "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        for line in smi.stdout.strip().splitlines():
            say(f"nvidia-smi: {line}")
    except (OSError, subprocess.SubprocessError):
        say("nvidia-smi: not found")
    return "FAILED" not in suite
