"""No committed symbolic link leaves the checkout: a fixture linking to an absolute path that
existed only where it was written fails on every other machine (issue 53: submitit's
`.submission_file_*.sh` link, copied with its fixture)."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def committed_links() -> list[str]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-s"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the committed links cannot be listed")
    return [line.split("\t", 1)[1] for line in out.splitlines() if line.startswith("120000 ")]


def test_every_committed_link_is_relative_and_resolves_inside_the_checkout():
    for path in committed_links():
        target = os.readlink(ROOT / path)
        assert not os.path.isabs(target), f"{path} -> {target}: absolute"
        resolved = (ROOT / path).parent.joinpath(target).resolve()
        assert resolved.is_relative_to(ROOT), f"{path} -> {target}: leaves the checkout"
        assert resolved.exists(), f"{path} -> {target}: dangling"
