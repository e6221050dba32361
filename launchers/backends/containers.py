"""The container runtimes a site starts its ranks with (cluster.container_runtime;
docs/containers.md). One small object per kind turns (image, mounts, workdir, gpus) into a
step's arguments: options srun itself takes (pyxis) and a command that wraps the worker
(apptainer exec, ch-run). The worker inside is the same command with the same run spec,
writing to the sweep folder, which every runtime binds at its own path.

    get(name)        the runtime object of cluster.container_runtime
    step(point)      (srun options, wrapping command) of a step in the point's image
    environ(...)     a container step's environment: what its runtime needs, no host venv on PATH
    require(point)   a runtime or image that is not there, refused in one line, before anything runs
    stamped(points)  the points with their image's reference and digest, computed once per image

Every argument list is built from values, never through a shell.
"""
import functools
import hashlib
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass

from contract import values
from contract.point import CONTAINER_RUNTIMES
from launchers.suite import ROOT, ConfigError

HASH_CHUNK = 1 << 20
MOUNTPOINT_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ch_mountpoint.py")


@dataclass(frozen=True)
class Step:
    srun: tuple = ()   # srun's own options for the image (after the suite's, before srun_args)
    wrap: tuple = ()   # the runtime's command, between srun's options and the worker's


class Pyxis:
    """NVIDIA's SPANK plugin: the image and its mounts are srun options
    (github.com/NVIDIA/pyxis/wiki/Usage); enroot pulls registry images on each node."""
    name = "pyxis"

    def step(self, image, mounts, workdir, gpus) -> Step:
        return Step(srun=(f"--container-image={image}", f"--container-mounts={','.join(mounts)}",
                          f"--container-workdir={workdir}"))

    def missing(self):
        try:
            out = subprocess.run(["srun", "--help"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"srun --help failed ({exc})"
        if "--container-image" not in out.stdout + out.stderr:
            return "srun here has no --container-image option (`srun --help`: pyxis is not installed)"
        return None


class Apptainer:
    """`apptainer exec` inside each task: binds as src[:dest[:opts]], comma-separated;
    --nv binds the host's NVIDIA driver where the nodes have GPUs (man apptainer-exec)."""
    name = "apptainer"

    def step(self, image, mounts, workdir, gpus) -> Step:
        return Step(wrap=("apptainer", "exec", "--bind", ",".join(mounts), "--pwd", workdir,
                          *(("--nv",) if gpus else ()), image))

    def missing(self):
        return None if shutil.which("apptainer") else "apptainer is not on PATH here"


class Charliecloud:
    """`ch-run` inside each task, unprivileged (user and mount namespaces only, the host's
    network): an image directory or a SquashFS file (man ch-run). It binds SRC at DST only
    where DST is a directory of the image (ch-run creates none in a read-only image), takes
    no mount flags, and needs $USER set.

    A SquashFS image is mounted at `--mount=DIR`, made by ch_mountpoint.py in each task just
    before ch-run: ch-run's own making of its default mount point races between ranks that
    start together (docs/containers.md, "Ranks that start together")."""
    name = "charliecloud"

    def step(self, image, mounts, workdir, gpus) -> Step:
        binds = [a for m in mounts for a in ("-b", m)]
        run = ("ch-run", *binds, "--cd", workdir, image, "--")
        if not is_squashfs(image):
            return Step(wrap=run)
        folder = mount_point()
        return Step(wrap=(sys.executable, "-I", "-S", MOUNTPOINT_SCRIPT, folder,
                          run[0], f"--mount={folder}", *run[1:]))

    def missing(self):
        return None if shutil.which("ch-run") else "ch-run is not on PATH here (Debian: apt-get install charliecloud)"


KINDS = {r.name: r for r in (Pyxis(), Apptainer(), Charliecloud())}


def get(name: str):
    """The runtime object of a point's cluster.container_runtime (its choices: contract/point.py)."""
    if name not in KINDS:
        values.choice(name, "cluster.container_runtime", CONTAINER_RUNTIMES, error=ConfigError)
    return KINDS[name]


def image_key(point) -> str:
    """The setting the point's image comes from, as a user would override it."""
    fw = point.framework
    return "framework.container" if fw.container else f"cluster.containers.{fw.name}"


def mounts(point) -> list:
    """SRC:DST[:FLAGS] of every step in an image: the suite's checkout and the sweep folder at
    their own paths (the spec and the records name host paths), then the site's own."""
    root, sweep = str(ROOT), point.sweep
    out = [f"{root}:{root}"]
    if not (sweep + os.sep).startswith(root + os.sep):
        out.append(f"{sweep}:{sweep}")
    return out + [str(m) for m in point.cluster.container_mounts]


def step(point, image: str) -> Step:
    """The runtime's part of a step of `point` in `image`."""
    return get(point.cluster.container_runtime).step(image, mounts(point), str(ROOT),
                                                     bool(point.cluster.gpus))


def environ(point, env: dict) -> dict:
    """A container step's environment. PATH loses the entries inside the suite's checkout:
    bound into the image, a host venv there would shadow the image's own `python`.
    ch-run refuses to start without $USER, which a batch job need not have."""
    root = str(ROOT) + os.sep
    env = dict(env)
    if env.get("PATH"):
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                      if not (os.path.abspath(p) + os.sep).startswith(root))
    env.pop("VIRTUAL_ENV", None)
    if point.cluster.container_runtime == "charliecloud" and not env.get("USER"):
        env["USER"] = user()
    return env


def user() -> str:
    """$USER, else the login name of our uid (what a step without $USER gets: environ)."""
    return os.environ.get("USER") or pwd.getpwuid(os.getuid()).pw_name


def mount_point() -> str:
    """Where ch-run mounts a SquashFS image: its own default, /var/tmp/$USER.ch/mnt (man
    ch-run, --mount), outside every bind (a mount point under the checkout, the sweep or /tmp
    would show the image inside its own binds), on each node's /var/tmp."""
    return f"/var/tmp/{user()}.ch/mnt"


def is_squashfs(image: str) -> bool:
    """A path that is not a directory: ch-run runs a file only as a SquashFS archive."""
    return is_path(image) and not os.path.isdir(os.path.expanduser(image))


# ---- before anything runs ------------------------------------------------------------------
def is_path(image: str) -> bool:
    """A file or directory here, not a registry reference (nvcr.io#..., docker://...)."""
    return image.startswith(("/", "./", "../", "~"))


def check_settings(point) -> None:
    """What the config alone says is wrong (also for a dry run)."""
    runtime = get(point.cluster.container_runtime)
    if runtime.name == "charliecloud" and point.container_image:
        flagged = [m for m in point.cluster.container_mounts if str(m).count(":") > 1]
        if flagged:
            raise ConfigError(f"cluster.container_mounts: ch-run binds take SRC:DST, no flags "
                                     f"({flagged[0]}; cluster.container_runtime=charliecloud)")


@functools.lru_cache(maxsize=None)
def _missing(name: str):
    return KINDS[name].missing()


def require(point) -> None:
    """ConfigError, in one line naming the runtime and the setting, where the point's
    image cannot run from here: its runtime is not installed, its image file is not there, or
    (Charliecloud) the image lacks a directory to bind a host path at."""
    image = point.container_image
    if not image:
        return
    name = point.cluster.container_runtime
    check_settings(point)
    why = _missing(name)
    if why:
        raise ConfigError(f"cluster.container_runtime={name}: {why}")
    if is_path(image) and not os.path.exists(os.path.expanduser(image)):
        raise ConfigError(f"{image_key(point)}={image}: no such image here "
                                 f"(cluster.container_runtime={name})")
    if name == "charliecloud" and is_path(image):
        lacking = [d for d in map(_destination, mounts(point))
                   if not under_tmp(d) and not _image_has_dir(image, d)]
        if lacking:
            raise ConfigError(f"{image_key(point)}={image}: the image has no directory "
                                     f"{lacking[0]} to bind the host's at (ch-run makes none in a "
                                     "read-only image; add it to the image's recipe)")


def _destination(mount: str) -> str:
    parts = mount.split(":")
    return parts[1] if len(parts) > 1 else parts[0]


def under_tmp(path: str) -> bool:
    """ch-run binds the host's /tmp (or $TMPDIR) itself: paths below it need nothing."""
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return (os.path.abspath(path) + os.sep).startswith(os.path.abspath(tmp) + os.sep)


def _image_has_dir(image: str, path: str) -> bool:
    """Whether the image holds the directory `path`: a directory image by looking, a SquashFS
    file by `unsquashfs -l` (True, unchecked, where unsquashfs is not here)."""
    image = os.path.expanduser(image)
    if os.path.isdir(image):
        return os.path.isdir(os.path.join(image, path.lstrip("/")))
    if not shutil.which("unsquashfs"):
        return True
    out = subprocess.run(["unsquashfs", "-l", "-d", "", image, path], capture_output=True,
                         text=True, timeout=60)
    return path.rstrip("/") in out.stdout.splitlines()


# ---- what ran: the image's reference and digest ----------------------------------------------
def describe(runtime: str, image: str) -> dict:
    """The image as a rank record keeps it: the runtime, the reference as the site gave it,
    and a digest where one can be had here, else null and why (docs/containers.md)."""
    info = {"runtime": runtime, "image": image, "digest": None, "digest_of": None, "why": None}
    if "@sha256:" in image:
        info.update(digest="sha256:" + image.rsplit("@sha256:", 1)[1],
                    digest_of="the registry reference (pinned by digest)")
        return info
    path = os.path.expanduser(image)
    if is_path(image) and os.path.isfile(path):
        info.update(digest=_file_digest(path, *_stamp(path)), digest_of="the image file (sha256)")
    elif is_path(image) and os.path.isdir(path):
        info.update(digest=_tree_digest(path), digest_of="the directory image's listing (sha256 of "
                    "every entry's path, type, mode, size and mtime)")
    elif is_path(image):
        info["why"] = "the image is not here to hash"
    else:
        info["why"] = ("a registry tag, resolved by the runtime on each node: pin it as "
                       "NAME@sha256:DIGEST to record its digest")
    return info


def _stamp(path: str) -> tuple:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=None)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(HASH_CHUNK), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def _tree_digest(root: str) -> str:
    """Cheap and stable: a rebuilt or changed file changes its size or mtime; contents are
    not read (an unpacked image is many gigabytes)."""
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(folder, name)
            st = os.lstat(path)
            link = os.readlink(path) if os.path.islink(path) else ""
            h.update(f"{os.path.relpath(path, root)}\0{st.st_mode}\0{st.st_size}\0"
                     f"{st.st_mtime_ns}\0{link}\n".encode())
    return "sha256:" + h.hexdigest()


def stamped(pts: list) -> list:
    """Each point with `container` set where it runs in an image: hashed once per image."""
    seen = {}
    out = []
    for p in pts:
        image = p.container_image
        if not image:
            out.append(p)
            continue
        key = (p.cluster.container_runtime, image)
        if key not in seen:
            seen[key] = describe(*key)
        out.append(p.replace(container=seen[key]))
    return out
