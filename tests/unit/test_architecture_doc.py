"""docs/architecture.md names every module of the suite's packages: each .py file (not an
__init__.py) by its path from the checkout, or by its file name standing alone (`name.py`
not preceded by a letter, digit, `_` or `/`, as the package tree and the rules' table name
them). A module added without a word in the map fails here, named."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("analysis", "benchmarks", "certify", "contract", "frameworks", "healthchecks",
            "hydra_plugins", "launchers")


def modules() -> list[str]:
    return sorted(path.relative_to(ROOT).as_posix() for package in PACKAGES
                  for path in (ROOT / package).rglob("*.py") if path.name != "__init__.py")


def named(module: str, text: str) -> bool:
    name = module.rsplit("/", 1)[-1]
    return module in text or re.search(r"(?<![\w/])" + re.escape(name), text) is not None


def test_the_rule_reads_a_name_alone_or_a_path():
    text = "`a/b/c.py`, `d.py`, models/e.py and my_f.py"
    assert named("a/b/c.py", text) and named("x/d.py", text)
    assert not named("x/e.py", text) and not named("x/f.py", text)


def test_every_module_is_named_in_the_architecture_doc():
    text = (ROOT / "docs" / "architecture.md").read_text()
    found = modules()
    assert len(found) > 100  # the walk found the packages
    missing = [module for module in found if not named(module, text)]
    assert not missing, f"docs/architecture.md does not name: {', '.join(missing)}"
