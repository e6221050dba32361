"""Ranks of one node starting `ch-run` on the test image at the same moment (issue 52, item 8),
without Slurm: RANKS processes per round, each held at a gate after fork and released together,
ROUNDS rounds, each round a fresh $USER so that /var/tmp/$USER.ch does not exist yet (ch-run's
first start on a node), and nobody else's ch-run storage is touched.

ch-run 0.31 makes its default mount point with a stat, then a mkdir that dies on EEXIST.
That window is microseconds: on this machine's two cores 8 bare starts collided in about one
round of 20. strace delays every mkdir by DELAY_US, as a slow or loaded /var/tmp would, so
that ranks starting within that delay collide every time; the control test shows the bare
start failing under it, the other that the suite's step (containers.step) starts all ranks.
"""
import os
import shutil
import tempfile
import uuid

import pytest

from launchers.backends import containers
from tests import container_image

RANKS, ROUNDS = 8, 5
DELAY_US = 20000
MKDIR = "?mkdir,mkdirat"  # "?": no mkdir where an architecture has only mkdirat


@pytest.fixture(scope="module")
def image():
    if not shutil.which("ch-run"):
        pytest.skip("ch-run is not installed (make image-deps)")
    if not shutil.which("strace"):
        pytest.skip("strace is not installed (apt-get install strace): without its mkdir delay "
                    "the race is too rare here to test")
    path = container_image.path()
    if not path.exists():
        pytest.skip(f"the test image {path} is not built (make image)")
    return str(path)


def start_together(argv: list, user: str) -> list:
    """RANKS processes of `argv` released at once -> [(exit status, stderr)]. Each is forked
    and waits, before its exec, on a pipe that the parent closes once all are forked
    (subprocess.Popen cannot: it returns only after its child's exec). strace delays their
    mkdirs."""
    traced = ["strace", "-f", "-qq", "-o", os.devnull, "-e", f"trace={MKDIR}",
              "-e", f"inject={MKDIR}:delay_enter={DELAY_US}", *argv]
    env = {**os.environ, "USER": user}
    gate, release = os.pipe()
    ranks = []
    for _ in range(RANKS):
        err = tempfile.TemporaryFile()
        pid = os.fork()
        if pid == 0:  # the rank: held at the gate, then exec; never back into pytest
            try:
                os.close(release)
                os.read(gate, 1)
                os.dup2(err.fileno(), 2)
                os.execvpe(traced[0], traced, env)
            finally:
                os._exit(127)
        ranks.append((pid, err))
    os.close(gate)
    os.close(release)
    out = []
    for pid, err in ranks:
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        err.seek(0)
        out.append((status, err.read().decode(errors="replace").strip()))
        err.close()
    return out


def rounds(argv_of) -> list:
    """ROUNDS rounds -> the failed starts of each: (exit status, stderr)."""
    failed = []
    for _ in range(ROUNDS):
        user = f"dlbench-race-{uuid.uuid4().hex[:12]}"
        try:
            failed.append([r for r in start_together(argv_of(user), user) if r[0] != 0])
        finally:
            shutil.rmtree(f"/var/tmp/{user}.ch", ignore_errors=True)
    return failed


def test_the_bare_ch_run_start_races_on_its_mount_point(image):
    """The control: ch-run as the suite ran it before (no --mount) dies under the delay."""
    failed = rounds(lambda user: ["ch-run", "--cd", "/", image, "--", "true"])
    assert any(failed), "no start failed: the delay no longer provokes ch-run's mkdir race"
    assert all("can't mkdir" in err and "File exists" in err for f in failed for _, err in f), failed


def test_every_rank_of_the_suites_step_starts(image, monkeypatch):
    """containers.step's argument list, as each task runs it, RANKS at once, ROUNDS times."""
    runtime = containers.get("charliecloud")

    def argv_of(user):
        monkeypatch.setenv("USER", user)
        return [*runtime.step(image, [], "/", False).wrap, "true"]

    failed = rounds(argv_of)
    assert not any(failed), failed
