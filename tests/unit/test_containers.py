"""The container runtimes (launchers/backends/containers.py): each runtime's step against its
documented flags, written out in full (pyxis: github.com/NVIDIA/pyxis/wiki/Usage; Apptainer:
man apptainer-exec; Charliecloud: man ch-run), the refusals before anything runs, the image's
digest, and a container step's environment. docs/containers.md cites the same sources."""
import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from contract import paths
from contract.point import CONTAINER_RUNTIMES
from launchers.backends import containers
from launchers.backends.slurm import srun
from launchers.driver import run_spec
from launchers.plan import points
from launchers.suite import ROOT
from tests.unit.test_points import cfg_of

ROOT = str(ROOT)
NGC = "nvcr.io#nvidia/pytorch:24.05-py3"
SPEC = "/sweep/points/p/repeat-00/spec.json"


def make(*overrides, sweep="/sweep"):
    return points.make_point(cfg_of("launcher=slurm", *overrides), sweep, 0)


def step_of(point):
    """The repeat's srun line from `--gpus-per-node` on: what the runtime changes."""
    argv = srun.repeat_argv(point, SPEC, "/sweep/points/p/repeat-00", "py", 10)
    return argv[argv.index("--cpus-per-task=12") + 1:]


WORKER = ["python", "-m", "frameworks", "--spec", SPEC]


def test_pyxis_passes_image_mounts_and_workdir_to_srun():
    assert step_of(make("cluster=example_site")) == [
        "--gpus-per-node=1", f"--container-image={NGC}",
        f"--container-mounts={ROOT}:{ROOT},/sweep:/sweep,/lustre/datasets:/datasets:ro",
        f"--container-workdir={ROOT}", "--cpu-bind=cores", "--no-container-mount-home", *WORKER]


def test_apptainer_wraps_the_worker_after_srun_options():
    point = make("cluster=example_site", "cluster.container_runtime=apptainer",
                 "cluster.srun_args=['--cpu-bind=cores']",
                 "cluster.containers.pytorch=/images/pytorch.sif")
    assert step_of(point) == [
        "--gpus-per-node=1", "--cpu-bind=cores", "apptainer", "exec",
        "--bind", f"{ROOT}:{ROOT},/sweep:/sweep,/lustre/datasets:/datasets:ro",
        "--pwd", ROOT, "--nv", "/images/pytorch.sif", *WORKER]
    # no GPUs on the nodes: no --nv
    cpu = point.replace(cluster=dataclasses.replace(point.cluster, gpus=False))
    assert "--nv" not in containers.step(cpu, "/images/pytorch.sif").wrap


def premade(folder="/var/tmp/me.ch/mnt"):
    """What precedes ch-run on a SquashFS image: its mount point made first (ch_mountpoint.py)."""
    return [sys.executable, "-I", "-S", containers.MOUNTPOINT_SCRIPT, folder, "ch-run",
            f"--mount={folder}"]


def test_charliecloud_binds_each_path_and_ends_its_options(monkeypatch):
    monkeypatch.setenv("USER", "me")
    point = make("cluster=localtest_charliecloud", "cluster.containers.pytorch=/images/pt.sqfs",
                 "cluster.container_mounts=[/data:/data]")
    argv = srun.repeat_argv(point, SPEC, "/sweep/points/p/repeat-00", "py", 10)
    assert argv[argv.index("--gpus-per-node=1") + 1:] == [
        *premade(), "-b", f"{ROOT}:{ROOT}", "-b", "/sweep:/sweep", "-b", "/data:/data",
        "--cd", ROOT, "/images/pt.sqfs", "--", "python3", "-m", "frameworks", "--spec", SPEC]


def test_a_directory_image_needs_no_mount_point(tmp_path):
    """ch-run mounts nothing for an image directory (and warns at --mount): plain ch-run."""
    point = make("cluster=localtest_charliecloud", f"cluster.containers.pytorch={tmp_path}")
    assert containers.step(point, str(tmp_path)).wrap == (
        "ch-run", "-b", f"{ROOT}:{ROOT}", "-b", "/sweep:/sweep", "--cd", ROOT, str(tmp_path), "--")


def test_the_mount_point_is_made_before_ch_run_runs(tmp_path):
    """ch_mountpoint.py as a task runs it: the folder made (again: already there is fine), then
    the command in its place; a folder it cannot make is one line and exit status 1."""
    folder = tmp_path / "user.ch" / "mnt"
    for _ in range(2):
        out = subprocess.run([sys.executable, "-I", "-S", containers.MOUNTPOINT_SCRIPT, str(folder),
                              "sh", "-c", "echo $$", "sh"], capture_output=True, text=True)
        assert out.returncode == 0 and folder.is_dir() and out.stdout.strip().isdigit(), out
    (tmp_path / "file").write_text("")
    out = subprocess.run([sys.executable, "-I", "-S", containers.MOUNTPOINT_SCRIPT,
                          str(tmp_path / "file" / "mnt"), "true"], capture_output=True, text=True)
    assert out.returncode == 1 and out.stderr == (f"ch_mountpoint: cannot make ch-run's mount point "
                                                  f"{tmp_path}/file/mnt: Not a directory\n")


def test_a_sweep_inside_the_checkout_is_bound_with_it():
    point = make("cluster=localtest_charliecloud", "cluster.containers.pytorch=/i.sqfs",
                 sweep=os.path.join(ROOT, "outputs", "s"))
    assert containers.mounts(point) == [f"{ROOT}:{ROOT}"]


def test_the_health_step_runs_in_the_pytorch_image_with_the_same_runtime(monkeypatch):
    monkeypatch.setenv("USER", "me")
    point = make("cluster=localtest_charliecloud", "cluster.containers.pytorch=/i.sqfs",
                 "framework=tensorflow", "nodes=2")
    argv = srun.health_argv(point, "/h/spec.json", "/h", "py")
    assert argv[argv.index(sys.executable):] == [
        *premade(), "-b", f"{ROOT}:{ROOT}", "-b", "/sweep:/sweep", "--cd", ROOT, "/i.sqfs", "--",
        "python3", "-m", "healthchecks.rank", "--spec", "/h/spec.json"]


# ---- refused in one line, before anything runs ------------------------------------------------
def test_an_unknown_runtime_is_refused_when_the_point_is_made():
    with pytest.raises(points.ConfigError, match=r"^cluster.container_runtime must be pyxis, "
                                                 r"apptainer or charliecloud, got 'docker'$"):
        make("cluster=example_site", "cluster.container_runtime=docker")
    # the choices the point declares are the runtimes there are
    assert tuple(containers.KINDS) == CONTAINER_RUNTIMES


def test_an_image_left_to_the_user_must_be_given():
    with pytest.raises(points.ConfigError, match=r"^cluster.containers.pytorch is not set"):
        make("cluster=localtest_charliecloud")


def test_a_missing_runtime_names_the_runtime(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no apptainer, no ch-run, no srun here
    containers._missing.cache_clear()
    try:
        for runtime, why in (("apptainer", "apptainer is not on PATH here"),
                             ("charliecloud", "ch-run is not on PATH here"),
                             ("pyxis", "srun --help failed")):
            point = make("cluster=example_site", f"cluster.container_runtime={runtime}",
                         "cluster.container_mounts=[]")
            with pytest.raises(points.ConfigError) as exc:
                containers.require(point)
            assert str(exc.value).startswith(f"cluster.container_runtime={runtime}: {why}")
            assert "\n" not in str(exc.value)
    finally:
        containers._missing.cache_clear()


def test_pyxis_is_missing_where_srun_has_no_container_option(monkeypatch, tmp_path):
    fake = tmp_path / "srun"
    fake.write_text("#!/bin/sh\necho 'Usage: srun [OPTIONS(0)...]\n  --container=PATH'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert containers.Pyxis().missing() == ("srun here has no --container-image option "
                                            "(`srun --help`: pyxis is not installed)")
    fake.write_text("#!/bin/sh\necho '  --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH'\n")
    assert containers.Pyxis().missing() is None


def test_an_image_path_that_is_not_there_names_its_setting(monkeypatch, tmp_path):
    monkeypatch.setattr(containers, "_missing", lambda name: None)  # the runtime is here
    point = make("cluster=localtest_charliecloud", f"cluster.containers.pytorch={tmp_path}/no.sqfs")
    with pytest.raises(points.ConfigError, match=rf"^cluster.containers.pytorch={tmp_path}/no.sqfs: "
                                                 r"no such image here \(cluster.container_runtime=charliecloud\)$"):
        containers.require(point)
    point = make("cluster=example_site", f"framework.container={tmp_path}/x.sif",
                 "cluster.container_runtime=apptainer")
    with pytest.raises(points.ConfigError, match=r"^framework.container="):
        containers.require(point)
    containers.require(make("cluster=example_site"))  # a registry reference: nothing to look at


def test_charliecloud_needs_a_directory_for_each_bind_outside_tmp(monkeypatch, tmp_path):
    monkeypatch.setattr(containers, "_missing", lambda name: None)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))   # what ch-run binds: not the checkout
    image = tmp_path / "img"
    image.mkdir()
    point = make("cluster=localtest_charliecloud", f"cluster.containers.pytorch={image}",
                 sweep="/sweep")
    with pytest.raises(points.ConfigError, match=rf"the image has no directory {ROOT} to bind"):
        containers.require(point)
    (image / ROOT.lstrip("/")).mkdir(parents=True)
    with pytest.raises(points.ConfigError, match=r"the image has no directory /sweep to bind"):
        containers.require(point)
    (image / "sweep").mkdir()
    containers.require(point)
    # a sweep under /tmp ($TMPDIR) needs none: ch-run binds the host's itself
    containers.require(make("cluster=localtest_charliecloud", f"cluster.containers.pytorch={image}",
                            sweep=str(tmp_path / "tmp" / "s")))
    flagged = make("cluster=localtest_charliecloud", f"cluster.containers.pytorch={image}",
                   "cluster.container_mounts=[/data:/data:ro]")
    with pytest.raises(points.ConfigError, match=r"^cluster.container_mounts: ch-run binds take "
                                                 r"SRC:DST, no flags \(/data:/data:ro;"):
        containers.check_settings(flagged)


# ---- what ran: the digest ----------------------------------------------------------------------
def test_a_file_image_digest_is_its_sha256(tmp_path):
    image = tmp_path / "i.sqfs"
    image.write_bytes(b"squashfs" * 1000)
    got = containers.describe("charliecloud", str(image))
    assert got["digest"] == "sha256:" + hashlib.sha256(b"squashfs" * 1000).hexdigest()
    assert got["image"] == str(image) and got["runtime"] == "charliecloud" and got["why"] is None


def test_a_directory_image_digest_follows_its_listing(tmp_path):
    (tmp_path / "usr").mkdir()
    (tmp_path / "usr" / "python3").write_text("a")
    first = containers.describe("charliecloud", str(tmp_path))["digest"]
    assert first == containers.describe("charliecloud", str(tmp_path))["digest"]
    (tmp_path / "usr" / "python3").write_text("ab")
    assert containers.describe("charliecloud", str(tmp_path))["digest"] != first


def test_a_registry_image_has_its_pinned_digest_or_says_why_not():
    pinned = containers.describe("pyxis", "nvcr.io#nvidia/pytorch@sha256:" + "ab" * 32)
    assert pinned["digest"] == "sha256:" + "ab" * 32
    tag = containers.describe("pyxis", NGC)
    assert tag["digest"] is None and tag["why"].startswith("a registry tag")


def test_stamped_hashes_each_image_once_and_the_spec_carries_it(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(containers, "describe", lambda r, i: calls.append(i) or {"image": i})
    pts = [make("cluster=example_site", f"seed={s}") for s in range(3)] + [make("cluster=localtest")]
    got = containers.stamped(pts)
    assert calls == [NGC] and [p.container for p in got] == [{"image": NGC}] * 3 + [None]
    assert run_spec.of(got[0], 0).as_dict()["container"] == {"image": NGC}
    assert paths.SPEC_SCHEMA  # the spec file keeps its schema: `container` is one more key


def test_a_container_steps_environment(monkeypatch):
    point = make("cluster=localtest_charliecloud", "cluster.containers.pytorch=/i.sqfs")
    env = containers.environ(point, {"PATH": f"{ROOT}/.venv/bin:/usr/bin:/bin",
                                     "VIRTUAL_ENV": f"{ROOT}/.venv"})
    assert env["PATH"] == "/usr/bin:/bin" and "VIRTUAL_ENV" not in env  # no host venv inside
    assert env["USER"]  # ch-run refuses to start without it
    assert containers.environ(point, {"USER": "me"})["USER"] == "me"
    step = srun.step_env(point, "node1", 20000, base={"PATH": f"{ROOT}/.venv/bin:/bin"})
    assert step["PATH"] == "/bin" and step["PYTHONPATH"].split(os.pathsep)[0] == ROOT


@pytest.mark.skipif(not shutil.which("mksquashfs") or not shutil.which("unsquashfs"),
                    reason="squashfs-tools not installed (make image-deps)")
def test_charliecloud_looks_into_a_squashfs_image(monkeypatch, tmp_path):
    monkeypatch.setattr(containers, "_missing", lambda name: None)
    monkeypatch.setenv("TMPDIR", str(tmp_path))   # what ch-run binds: the sweep, not the checkout
    tree = tmp_path / "tree"
    (tree / "usr").mkdir(parents=True)
    image = tmp_path / "i.sqfs"
    subprocess.run(["mksquashfs", str(tree), str(image), "-quiet", "-no-progress"], check=True)
    point = make("cluster=localtest_charliecloud", f"cluster.containers.pytorch={image}",
                 sweep=str(tmp_path / "s"))
    with pytest.raises(points.ConfigError, match=rf"the image has no directory {ROOT} to bind"):
        containers.require(point)
    (tree / ROOT.lstrip("/")).mkdir(parents=True)
    subprocess.run(["mksquashfs", str(tree), str(image), "-noappend", "-quiet", "-no-progress"],
                   check=True)
    containers.require(point)
