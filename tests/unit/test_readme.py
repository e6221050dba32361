"""The README stays a front door (issue 52): at most 150 lines, `make demo` and `make test` its
first two commands, and every file it names there."""
import re

from launchers.suite import ROOT

README = ROOT / "README.md"
MOST = 150


def test_the_readme_is_short_and_opens_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= MOST, f"README.md has {len(lines)} lines; at most {MOST}: move reference detail into docs/"
    commands = [line.split()[:2] for line in lines if line.startswith("    ")]
    assert commands[:2] == [["make", "demo"], ["make", "test"]]


def test_every_file_it_names_is_there():
    text = README.read_text()
    named = set(re.findall(r"\b((?:docs|benchmarks|examples|conf|tests)/[\w./-]*\.(?:md|py|ipynb|png|yaml))", text))
    assert named and [n for n in sorted(named) if not (ROOT / n).exists()] == []
