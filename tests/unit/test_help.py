"""The help a user reads first (`python -m launch --help`: the suite's commands, the keys most
used, where the rest is; tests/unit/golden/launch_help.txt), each command's own --help as full
as certify's, and Hydra's own help still reachable.

Regenerate the golden after an intended change with
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_help.py
"""
import os
import re
from pathlib import Path

import pytest

import launch
from launchers.plan import precheck

GOLDEN = Path(__file__).parent / "golden" / "launch_help.txt"
COMMANDS = ("status", "cancel", "doctor", "health", "certify", "dataset")


def help_of(capsys, *argv) -> str:
    try:
        code = launch.main(list(argv))
    except SystemExit as exc:  # argparse's --help ends so
        code = exc.code
    assert code == 0
    return capsys.readouterr().out


def test_the_first_help_is_the_golden_one_and_short(capsys):
    text = help_of(capsys, "--help")
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text(), f"launch --help differs from {GOLDEN} (UPDATE_GOLDEN=1 rewrites it)"
    assert len(text.splitlines()) <= 40
    assert help_of(capsys, "-m", "model=bert_base", "-h") == text   # -h anywhere, as Hydra took it


def test_it_names_every_command_and_only_options_that_exist(capsys):
    text = help_of(capsys, "--help")
    listed = re.findall(r"^  (\w+) {2,}", text, flags=re.M)
    assert set(COMMANDS) <= set(listed)
    groups = precheck.groups()
    for group in ("framework", "model", "precision", "preset", "launcher"):
        line = next(x for x in text.splitlines() if x.startswith(f"  {group}="))
        default, rest = line.split("=", 1)[1].split(None, 1)
        named = [default] + ([n.strip() for n in rest.split(",") if n.strip() != "..."]
                             if group in ("framework", "model", "precision") else [])
        assert set(named) <= set(groups[group]), (group, named)
    for doc in re.findall(r"docs/[\w./-]+\.md", text):
        assert (Path(launch.ROOT) / doc).exists(), doc


@pytest.mark.parametrize("command", COMMANDS)
def test_each_commands_help_says_what_how_and_its_exit_status(command, capsys):
    text = help_of(capsys, command, "--help")
    assert f"python -m launch {command}" in text
    assert re.search(rf"^    python -m launch .*{command}", text, flags=re.M), "no example"
    assert re.search(r"exit(s| status)", text, flags=re.I), "no exit status"


def test_hydras_own_help_and_config_stay_reachable(capsys):
    assert "== Flags ==" in help_of(capsys, "--hydra-help")
    assert "model:" in help_of(capsys, "--cfg", "job", "model.size=tiny")
