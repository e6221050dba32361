"""The sweep's layout and schema names live in contract/paths.py and nowhere else;
the record files the suite writes are as readable as any file of their user's."""
import ast
import json
import os
import re
import stat

import pytest

from contract import paths, records
from tests.sweepfiles import write_point, write_repeat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What would spell the layout out again: file names of a sweep, folder prefixes, schema names.
LITERAL = re.compile(r"(point|spec|run|step|slurm)\.json|srun\.log|rank-|repeat-|\.interrupted|"
                     r"dlbench\.")
SKIP_DIRS = {"tests", "outputs", "multirun", "__pycache__"}
# Once allowed to spell the layout out, now checked like every other file.
FORMERLY_ALLOWED = {"launchers/backends/slurm/launcher.py", "launchers/backends/slurm/allocation.py",
                    "launchers/backends/slurm/sacct.py", "launchers/commands/status.py"}


def code_files():
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        for name in sorted(files):
            path = os.path.relpath(os.path.join(folder, name), ROOT)
            if name.endswith(".py") and path != "contract/paths.py":
                yield path


def layout_literals(source: str):
    """(line, text) of each string literal naming the layout; docstrings and comments are prose."""
    tree = ast.parse(source)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings and LITERAL.search(node.value):
            yield node.lineno, node.value


def test_the_layout_is_spelled_out_only_in_layout_py():
    found = [f"{path}:{line}: {text!r}" for path in code_files()
             for line, text in layout_literals(open(os.path.join(ROOT, path)).read())]
    assert not found, "layout literals outside contract/paths.py (use its names):\n" \
        + "\n".join(found)


def test_the_check_sees_literals_and_leaves_prose():
    source = '"""Reads run.json."""\nx = f"rank-{r:05d}.log"  # rank-\ny = "repeat-" + "a"\n' \
             'def f():\n    """point.json"""\n    return {"schema": "dlbench.run"}\n'
    assert [line for line, _ in layout_literals(source)] == [2, 3, 6]
    assert all(os.path.exists(os.path.join(ROOT, p)) for p in FORMERLY_ALLOWED)
    assert FORMERLY_ALLOWED <= set(code_files())


def test_names():
    assert paths.repeat_name(3) == "repeat-03" and paths.REPEAT_RE.match("repeat-03")
    assert not paths.REPEAT_RE.match("repeat-03.interrupted-1700000000")
    assert paths.INTERRUPTED_RE.match(os.path.basename(paths.interrupted_dir("/s/repeat-03", 17.4)))
    assert paths.rank_record_name(7) == "rank-00007.json" and paths.RANK_RECORD_RE.match("rank-00007.json")
    assert paths.rank_log_name(7) == "rank-00007.log"
    assert paths.search_ledger("/s", "000-x") == "/s/searches/000-x.json"
    assert paths.sweep_of(paths.point_dir("/a/s", "000-x")) == "/a/s"
    assert records.RECORD_SCHEMA == paths.RANK_SCHEMA == "dlbench.rank"


def test_point_files_of_a_folder_of_sweeps(tmp_path):
    for sweep in ("a", "b/c"):
        pt = write_point(str(tmp_path / sweep), "000-x", repeats=1)
        write_repeat(pt, 0, [1.0])
    os.makedirs(tmp_path / ".hidden" / "points" / "000-y")
    (tmp_path / ".hidden" / "points" / "000-y" / "point.json").write_text("{}")
    assert paths.point_files(tmp_path) == [str(tmp_path / s / "points" / "000-x" / "point.json")
                                            for s in ("a", "b/c")]


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_record_gets_the_mode_the_umask_gives(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        records.write_json_atomic(tmp_path / "run.json", {"a": 1})
        records.write_json_atomic(tmp_path / "run.json", {"a": 2})  # replacing keeps it so
    finally:
        os.umask(old)
    got = stat.S_IMODE(os.stat(tmp_path / "run.json").st_mode)
    assert got == mode and json.loads((tmp_path / "run.json").read_text()) == {"a": 2}
    if umask == 0o022:  # readable by a colleague: group and others
        assert got & stat.S_IRGRP and got & stat.S_IROTH
    assert os.listdir(tmp_path) == ["run.json"]
