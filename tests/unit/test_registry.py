"""The framework registry (frameworks/registry.py): each framework declares one adapter, read
without importing the framework, whose references all name something that exists."""
import ast
import subprocess
import sys

import pytest

from contract import modes
from frameworks import registry
from frameworks.common.capability import Unsupported
from launchers.suite import ROOT

FRAMEWORK_MODULES = ("torch", "tensorflow", "jax", "paddle", "mxnet", "mindspore", "oneflow",
                     "numpy")


def test_every_framework_declares_an_adapter_and_its_benches():
    for name in modes.MODES:
        adapter = registry.get(name)
        assert adapter.name == name and adapter.package == f"frameworks.{name}"
        assert {"train", "input"} <= set(adapter.benches), name
        assert adapter.oom is not None and adapter.data_backends, name
    assert "comm" in registry.get("pytorch").benches
    with pytest.raises(Unsupported, match="bench=comm is not implemented for jax yet"):
        registry.get("jax").bench("comm")
    with pytest.raises(ModuleNotFoundError):
        registry.get("no_such_framework")


def test_reading_the_adapters_imports_no_framework():
    """What lets a framework that cannot import still leave a record that says why."""
    code = ("import sys; from frameworks import registry; "
            f"[registry.get(n) for n in {sorted(modes.MODES)!r}]; "
            f"print(sorted(m for m in {FRAMEWORK_MODULES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _defines(path, dotted: str) -> bool:
    """Whether the module file defines `Name` or `Name.attr` at its top level (read, not run)."""
    body = ast.parse(path.read_text()).body
    first, _, rest = dotted.partition(".")
    for node in body:
        names = [node.name] if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else \
            [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if first in names:
            return not rest or any(getattr(n, "name", None) == rest for n in getattr(node, "body", []))
    return False


def test_every_reference_names_what_its_module_defines():
    for name in modes.MODES:
        adapter = registry.get(name)
        refs = [adapter.oom] + [r for b in adapter.benches.values() for r in (b.session, b.files) if r]
        for ref in refs:
            module, _, attr = ref.partition(":")
            assert module.startswith("."), ref   # relative to the framework's package
            path = ROOT / "frameworks" / name / (module[1:].replace(".", "/") + ".py")
            assert path.exists() and _defines(path, attr), (name, ref)


def test_a_reference_resolves_to_its_object():
    from frameworks.common import harness
    assert registry.resolve("frameworks.common.harness:Session.is_oom") is harness.Session.is_oom
    assert registry.resolve(".harness:HostTimer", "frameworks.common") is harness.HostTimer
    assert registry.resolve(len) is len
