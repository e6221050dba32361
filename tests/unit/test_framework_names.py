"""A new framework is its own folder (frameworks/<name>/), its conf file and its docs page:
no code outside frameworks/ names a framework, but where a rule is that one framework's,
each allowed here with its reason. What a framework trains, its colour and its facts are
its adapter's (frameworks/registry.py), asked by name."""
import ast

from frameworks import registry
from launchers.suite import ROOT

CODE = ("analysis", "benchmarks", "certify", "contract", "healthchecks", "hydra_plugins",
        "launchers", "launch.py")
ALLOWED = {
    # the DataParallel against DDP study is PyTorch's (torch.nn.DataParallel)
    ("benchmarks/dp_vs_ddp.py", "pytorch"): 1,
    # the node checks run in PyTorch's Python or container (NCCL for the links)
    ("launchers/health/step.py", "pytorch"): 1,
}


def _literals() -> dict:
    """{(file, name): count} of the string literals that are a framework's name."""
    names = set(registry.names())
    found: dict = {}
    for top in CODE:
        paths = [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py"))
        for path in paths:
            text = path.read_text()
            if not any(q + n + q in text for n in names for q in "\"'"):
                continue   # no such literal (most files): not parsed, to keep this fast
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Constant) and node.value in names:
                    key = (str(path.relative_to(ROOT)), node.value)
                    found[key] = found.get(key, 0) + 1
    return found


def test_no_code_outside_frameworks_names_a_framework_but_the_allowed():
    assert _literals() == ALLOWED
