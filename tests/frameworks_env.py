"""Helpers for tests that run code inside a framework's own environment (.venvs/<name>)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODELS_CONF = ROOT / "conf" / "model"


def framework_python(name: str):
    """The interpreter its conf/framework/<name>.yaml names, or None for the suite's own."""
    from omegaconf import OmegaConf
    python = OmegaConf.load(ROOT / "conf" / "framework" / f"{name}.yaml").get("python")
    return str(ROOT / python) if python else None


def require_env(name: str) -> str:
    """The framework's interpreter, or skip the test saying how to build it."""
    python = framework_python(name)
    if python and not os.path.exists(python):
        pytest.skip(f"{name} environment not built: run `make env-{name}`")
    return python


def model_cfg(model: str, size: str) -> dict:
    """A model's resolved settings, as a run spec carries them."""
    from omegaconf import OmegaConf
    from launchers.points import resolve_model
    cfg = OmegaConf.load(MODELS_CONF / f"{model}.yaml")
    cfg.size = size
    return resolve_model(cfg)


def run_in_env(python: str, code: str, *args, timeout=600) -> str:
    """Run a snippet with the framework's interpreter from the repository root."""
    out = subprocess.run([python, "-c", code, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def parameter_count(framework: str, model: str, size: str) -> int:
    """frameworks.<framework>.models.parameter_count(cfg), computed in that framework's env."""
    python = require_env(framework) or sys.executable
    code = ("import json, sys; from frameworks.%s.models import parameter_count; "
            "print(parameter_count(json.loads(sys.argv[1])))" % framework)
    return int(run_in_env(python, code, json.dumps(model_cfg(model, size))).strip().splitlines()[-1])


def amp_gap(framework: str, amp_dtype: str = "bf16", compile: bool = False):
    """What the capability check says of AMP in this framework on this machine's CPU: None
    where it runs, else the one line its `unsupported` record carries. Tests expect `ok`
    or `unsupported` from it, so they hold on CPUs with and without bf16."""
    from frameworks.common import capability
    return capability.precision_gap(framework, {"precision": "amp", "amp_dtype": amp_dtype,
                                                "compile": compile})


def assert_unsupported(run: dict, ranks: list, gap: str) -> None:
    """A point the device cannot run: every rank said so in one line, nothing trained."""
    assert run["status"] == "unsupported", run
    assert run["error"] == f"rank 0: {gap}", run["error"]
    assert ranks and all(r["status"] == "unsupported" and r["error"] == gap for r in ranks), ranks
    assert all(not r["steps"] for r in ranks)
