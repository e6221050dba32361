"""The suite's test image: Debian 12 (mmdebstrap) with its own Python 3.11 and torch==2.13.0
(the CPU wheel) from PyPI, one SquashFS file that Charliecloud runs (docs/containers.md).

    python -m tests.container_image build    build it unless it is cached; print its path
    python -m tests.container_image path     print its path, built or not
    make image                               the same as build, after the apt packages

It is cached outside the clone (`cache_dir()`) in two parts: the image's tree (Debian and the
wheels installed: most of the build) under a name keyed by a hash of its recipe and this
package's source, and the SquashFS file made from it, keyed by the checkout's path too (ch-run
needs a directory for it in the image, which mksquashfs adds as a pseudo-file: the tree stays
whole). A clone elsewhere makes only the SquashFS file (seconds); the three newest files stay.
Concurrent builds wait for one another (a lock).
"""
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from contract import records
from launchers.suite import ROOT
from tests.caches import cache_root

HERE = Path(__file__).resolve().parent
RECIPE = {
    "suite": "bookworm",
    "mirror": "http://deb.debian.org/debian",
    "debs": ["python3", "python3-pip", "ca-certificates"],
    "wheels": ["torch==2.13.0", "numpy==2.4.6"],
    "python": "3.11",
}
# ch-run binds a host path only where the image has a directory for it (it makes none in a
# read-only image): the checkout's path. Sweep folders under /tmp need none.
MOUNT_POINTS = (str(ROOT),)
KEEP = 3   # SquashFS files of other checkouts' paths kept
# The wheels come from the host's pip, which has this network's configuration; the image's own
# pip installs them offline. The tags are the image's Python's, whatever the host's.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
TOOLS = ("mmdebstrap", "ch-run", "mksquashfs")
PACKAGES = "charliecloud mmdebstrap squashfs-tools squashfuse fuse3"


def cache_dir() -> Path:
    """$DLBENCH_IMAGE_CACHE, else images/ in the tests' cache (tests/caches.py)."""
    if os.environ.get("DLBENCH_IMAGE_CACHE"):
        return Path(os.environ["DLBENCH_IMAGE_CACHE"])
    return cache_root() / "images"


def tree_key() -> str:
    """The image's tree: its recipe and this package's source."""
    h = hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode())
    for source in sorted(HERE.glob("*.py")):
        h.update(source.read_bytes())
    return h.hexdigest()[:16]


def key() -> str:
    """The SquashFS file: its tree and the mount points in it."""
    return hashlib.sha256(json.dumps([tree_key(), MOUNT_POINTS]).encode()).hexdigest()[:16]


def tree() -> Path:
    return cache_dir() / f"tree-pytorch-cpu-{tree_key()}"


def path() -> Path:
    return cache_dir() / f"pytorch-cpu-{key()}.sqfs"


def skip_reason():
    """Why a test cannot have the image here, or None."""
    if os.getuid() != 0:
        return "the test image needs root (mmdebstrap); `make image` as root builds it"
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        return f"{', '.join(missing)} not installed (`make image-deps`: apt-get install {PACKAGES})"
    return None


def _run(argv, env=None, what=""):
    out = subprocess.run(argv, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{what or argv[0]} failed ({out.returncode}): "
                           f"{(out.stderr or out.stdout).strip()[-2000:]}")
    return out.stdout


def _chroot_env() -> dict:
    return dict(os.environ, USER=os.environ.get("USER") or "root")


def build(log=print) -> Path:
    """The image, built unless cached: its tree (mmdebstrap, the wheels, a check) unless cached,
    then mksquashfs with the mount points."""
    target = path()
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent build of the same image: wait for it
        if target.exists():
            return target
        t0 = time.monotonic()
        root, got = _tree(log)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
            log(f"image: mksquashfs {root}, mount points {', '.join(MOUNT_POINTS)}")
            tmp = Path(work) / "image.sqfs"
            _run(["mksquashfs", str(root), str(tmp), "-comp", "zstd", "-Xcompression-level", "3",
                  "-noappend", "-quiet", "-no-progress", *_mount_points(root)], what="mksquashfs")
            info = {"recipe": RECIPE, "mount_points": list(MOUNT_POINTS), "key": key(),
                    "tree": root.name, **got, "built_unix": time.time(),
                    "build_s": round(time.monotonic() - t0, 1)}
            records.write_json_atomic(str(target) + ".json", info)  # what the build found in it
            os.replace(tmp, target)  # whole or not at all; the image's presence means done
        _prune(target)
        log(f"image: built in {info['build_s']} s: {target}")
    return target


def _tree(log) -> tuple:
    """The image's tree, built unless cached (under the build lock) -> (its path, what the
    check found in it: torch's and Python's versions)."""
    root = tree()
    facts = root.with_name(root.name + ".json")
    if root.exists() and facts.exists():
        return root, json.loads(facts.read_text())
    work = Path(tempfile.mkdtemp(dir=root.parent, prefix=".tree-"))
    try:
        new, wheels = work / "root", work / "wheels"
        log(f"image: mmdebstrap {RECIPE['suite']} into {new}")
        _run(["mmdebstrap", "--variant=minbase", "--include=" + ",".join(RECIPE["debs"]),
              RECIPE["suite"], str(new), RECIPE["mirror"]], what="mmdebstrap")
        for d in ("proc", "dev", "sys", "tmp", "home", "mnt"):
            (new / d).mkdir(parents=True, exist_ok=True)
        for f in ("etc/hosts", "etc/resolv.conf"):  # ch-run binds the host's over them
            (new / f).touch()
        log(f"image: pip download {' '.join(RECIPE['wheels'])}")
        plat = [a for p in PLATFORMS for a in ("--platform", p)]
        _run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
              "--python-version", RECIPE["python"], "--implementation", "cp", *plat,
              "-d", str(wheels), *RECIPE["wheels"]], what="pip download")
        log("image: pip install in the image, offline")
        _run(["ch-run", "-w", "-b", f"{wheels}:/wheels", str(new), "--", "python3", "-m",
              "pip", "install", "-q", "--break-system-packages", "--no-cache-dir", "--no-index",
              "--find-links", "/wheels", *RECIPE["wheels"]], env=_chroot_env(),
             what="pip install in the image")
        got = _run(["ch-run", str(new), "--", "python3", "-c",
                    "import sys, numpy, torch; print(torch.__version__, sys.version.split()[0])"],
                   env=_chroot_env(), what="import torch in the image").split()
        log(f"image: torch {got[0]}, Python {got[1]}")
        shutil.rmtree(root, ignore_errors=True)   # a tree without its facts: an interrupted build
        os.replace(new, root)
        records.write_json_atomic(str(facts), {"torch": got[0], "python": got[1]})  # last: done
        return root, {"torch": got[0], "python": got[1]}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mount_points(root: Path) -> list:
    """mksquashfs's pseudo-definitions of the directories MOUNT_POINTS need that the tree lacks
    (each path's missing parents first), so that the cached tree is never changed."""
    out = []
    for mount in MOUNT_POINTS:
        parts = Path(mount).parts[1:]
        for i in range(1, len(parts) + 1):
            inside = "/".join(parts[:i])
            if not (root / inside).exists() and inside not in out:
                out.append(inside)
    return [a for d in out for a in ("-p", f"{d} d 755 0 0")]


def _prune(keep: Path) -> None:
    """The KEEP newest SquashFS files stay (other checkouts' tests may use them), and `keep`."""
    images = sorted(keep.parent.glob("pytorch-cpu-*.sqfs"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in images if p != keep][KEEP:]:
        for f in (old, old.with_name(old.name + ".json")):
            f.unlink(missing_ok=True)
