"""The framework registry (frameworks/registry.py): each framework declares one adapter, every
field of it in the same order, read without importing the framework (nor the workers' runtime,
frameworks/common), whose references all name something that exists."""
import ast
import dataclasses
import subprocess
import sys

import pytest

from contract.statuses import Unsupported
from frameworks import registry
from launchers.suite import ROOT

FRAMEWORK_MODULES = ("torch", "tensorflow", "jax", "paddle", "mxnet", "mindspore", "oneflow",
                     "numpy")


def test_every_framework_declares_an_adapter_and_its_benches():
    folders = sorted(p.name for p in (ROOT / "frameworks").iterdir()
                     if (p / "__init__.py").is_file() and p.name != "common")
    assert registry.names() == folders and "pytorch" in folders   # a framework is its folder
    for name in registry.names():
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
            "[registry.get(n) for n in registry.names()]; "
            f"print(sorted(m for m in {FRAMEWORK_MODULES!r} if m in sys.modules)); "
            "print(sorted(m for m in sys.modules if m.startswith('frameworks.common')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "[]"]


FIELDS = [f.name for f in dataclasses.fields(registry.Adapter)]


def test_every_adapter_declares_every_field_in_the_same_order():
    """The same small surface in each frameworks/<name>/__init__.py: the name and benches,
    then every other field by keyword, none left to its default, in the dataclass's order."""
    for name in registry.names():
        tree = ast.parse((ROOT / "frameworks" / name / "__init__.py").read_text())
        (call,) = [n.value for n in tree.body if isinstance(n, ast.Assign)
                   and [t.id for t in n.targets] == ["ADAPTER"]]
        assert len(call.args) == 2, name   # name, benches
        assert [k.arg for k in call.keywords] == FIELDS[2:], name


def test_the_facts_each_adapter_declares():
    get = registry.get
    # each imports as its name, but PyTorch
    assert {n: get(n).import_name for n in registry.names() if get(n).import_name != n} == {
        "pytorch": "torch"}
    assert registry.which("layouts") == registry.which("checkpoints") == ["pytorch"]
    assert [n for n in registry.names() if get(n).tracer] == ["jax", "pytorch", "tensorflow"]
    assert [n for n in registry.names() if get(n).precision.onednn_bf16] == ["mxnet", "paddle"]
    # a site's own adapter: its name is its module, eager under auto, no gaps, no layouts
    site = registry.Adapter("caffe", {})
    assert (site.import_name, site.modes.recommended, site.precision, site.tracer, site.layouts,
            site.checkpoints, site.models, site.colour) == (
        "caffe", "eager", registry.Precision(), None, False, False, (), None)


def test_which_frameworks_train_a_model_is_theirs_to_say():
    from contract import models
    assert registry.frameworks_of("llama3") == ["pytorch"]
    assert registry.frameworks_of("resnet50") == registry.names()   # every framework trains it
    assert registry.frameworks_of("no_such_model") == []
    for name in registry.names():
        assert set(registry.get(name).models) <= set(models.names()), name
    with pytest.raises(ValueError, match="^model=gpt is built for framework=pytorch only, not jax$"):
        registry.check_model("gpt", "jax")


def test_a_colour_per_framework_from_its_adapter_or_the_palette():
    colours = [registry.colour(registry.get(n)) for n in registry.names()]
    assert len(set(colours)) == len(colours)            # no two frameworks alike in a plot
    assert registry.colour(registry.get("pytorch")) == registry.get("pytorch").colour == "#e4572e"
    # one that declares none: PALETTE[crc32(name) % 6], the same in every process
    # (crc32(b"caffe") % 6 == 2, crc32(b"chainer") % 6 == 1)
    assert registry.colour(registry.Adapter("caffe", {})) == registry.PALETTE[2] == "#e377c2"
    assert registry.colour(registry.Adapter("chainer", {})) == registry.PALETTE[1]
    assert not set(registry.PALETTE) & set(colours)     # nor one like a declared framework


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
    for name in registry.names():
        adapter = registry.get(name)
        refs = [adapter.oom, adapter.tracer] + [r for b in adapter.benches.values()
                                                for r in (b.session, b.files)]
        refs = [r for r in refs if r]
        for ref in refs:
            module, _, attr = ref.partition(":")
            assert module.startswith("."), ref   # relative to the framework's package
            path = ROOT / "frameworks" / name / (module[1:].replace(".", "/") + ".py")
            assert path.exists() and _defines(path, attr), (name, ref)


def test_a_reference_resolves_to_its_object():
    from frameworks.common.session import HostTimer, Session
    assert registry.resolve("frameworks.common.session:Session.is_oom") is Session.is_oom
    assert registry.resolve(".session:HostTimer", "frameworks.common") is HostTimer
    assert registry.resolve(len) is len
