"""The supported releases, written once: the oldest release of a framework, and of what its
worker imports beside it, that each adapter supports and why (its `releases`,
frameworks/<name>/__init__.py); how two versions compare; which versions an installation has
(importlib.metadata: nothing is imported); what a point cannot run with them; and the
releases the checkout tests (the pins of its requirement files).

A site's image carries its own versions. The worker asks first (`check`, from
frameworks/common/harness.py, before the framework's import): a release older than one a
point needs ends the rank `unsupported`, naming the version found and the one needed, never
`failed` with a traceback from inside the framework. `launch doctor` reports each image's
versions against the same declarations (`judge`); docs/frameworks/README.md's table of
supported versions is `table()` (tests/unit/test_versions.py holds the page to it).

A pre-release counts as its release: NGC's images carry builds such as torch 2.6.0a0+ecf3bae,
2.6 ahead of its release. Standard library only: this runs in every framework's Python.
"""
import glob
import importlib.metadata
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .statuses import Unsupported

# When a release is needed: always, or only for some points.
ALWAYS, RANKS, FP16, TORCHTITAN = "always", "ranks", "fp16", "torchtitan"
WHEN = {ALWAYS: "",
        RANKS: "with several ranks",
        FP16: "with precision=amp amp_dtype=fp16 (loss scaling)",
        TORCHTITAN: "on torchtitan's path (Llama 3 and the MoE models on GPUs)"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The requirement files whose pins are the releases the checkout runs: the suite's own, each
# framework's environment, and the older releases' (mk/versions.mk).
REQUIREMENTS = ("requirements*.txt", "frameworks/*/requirements.txt",
                "tests/versions/*/requirements.txt")


@dataclass(frozen=True)
class Release:
    """The oldest release of `package` a framework's worker supports (`when`: always, or for
    some points only), and why: the API it needs from there on, or that older ones never ran."""
    package: str            # as people name it (the first of `dists` where none is given)
    oldest: str
    why: str
    when: str = ALWAYS      # ALWAYS, RANKS, FP16 or TORCHTITAN (WHEN says each in words)
    dists: tuple[str, ...] = ()  # the distributions it is installed as (tensorflow-cpu, ...); () = (package,)

    def __post_init__(self) -> None:
        if self.when not in WHEN:
            raise ValueError(f"Release({self.package!r}): when={self.when!r} is none of {', '.join(WHEN)}")

    @property
    def names(self) -> tuple[str, ...]:
        return self.dists or (self.package,)


def parse(version: str) -> tuple[int, ...]:
    """(2, 11) of '2.11.0+cu130', '2.11', 'v2.11.0rc1' or '2.11.0a0+ecf3bae': the release's
    numbers, trailing zeros dropped; ValueError where there are none."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", str(version).strip())
    if not m:
        raise ValueError(f"not a version: {version!r}")
    parts = [int(p) for p in m.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def older(version: str, than: str) -> bool:
    return parse(version) < parse(than)


def installed(release: Release) -> str | None:
    """The version of the first of the release's distributions installed here, or None."""
    for name in release.names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def found(releases: Iterable[Release]) -> dict[str, str | None]:
    """package -> the version installed here (None: not installed, or no metadata)."""
    out: dict[str, str | None] = {}
    for r in releases:
        if r.package not in out:
            out[r.package] = installed(r)
    return out


def conditions(spec: Any, world_size: int) -> set[str]:
    """What a rank of this run spec needs releases for: always, several ranks, fp16 AMP.
    torchtitan's path asks for its own (`require(releases, {TORCHTITAN})`) where it starts."""
    out = {ALWAYS}
    if world_size > 1:
        out.add(RANKS)
    if spec.precision == "amp" and spec.amp_dtype == "fp16":
        out.add(FP16)
    return out


def gaps(releases: Iterable[Release], versions: Mapping[str, str | None], asked: Collection[str]) -> list[str]:
    """One line per release needed (`asked`: conditions) that the versions found are older
    than; a package with no version known is not judged (the import will tell)."""
    out: list[str] = []
    for r in releases:
        have = versions.get(r.package)
        if r.when in asked and have is not None and older(have, r.oldest):
            when = f" {WHEN[r.when]}" if WHEN[r.when] else ""
            out.append(f"{r.package} {have} is older than {r.oldest}, the oldest this worker "
                       f"supports{when} ({r.why})")
    return out


def require(releases: Collection[Release], asked: Collection[str],
            versions: Mapping[str, str | None] | None = None) -> Mapping[str, str | None]:
    """The versions found (`versions`: found already); Unsupported, in one line, where a
    release asked for is older."""
    have = found(releases) if versions is None else versions
    bad = gaps(releases, have, asked)
    if bad:
        raise Unsupported("; ".join(bad) + " (docs/frameworks/README.md, \"Supported versions\")")
    return have


def check(releases: Collection[Release], spec: Any, world_size: int,
          versions: Mapping[str, str | None] | None = None) -> Mapping[str, str | None]:
    """The worker's first question, before its framework's import: `require` for this spec."""
    return require(releases, conditions(spec, world_size), versions)


# ---- what the checkout tests, and the page -------------------------------------------------

def pins(root: str = ROOT) -> dict[str, list[str]]:
    """distribution (lower case, '_' as '-') -> the versions pinned (==) by the checkout's
    requirement files, sorted oldest first."""
    out: dict[str, set[str]] = {}
    for pattern in REQUIREMENTS:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            with open(path) as f:
                for line in f:
                    m = re.match(r"\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)", line)
                    if m:
                        out.setdefault(_norm(m.group(1)), set()).add(m.group(2))
    return {k: sorted(v, key=parse) for k, v in out.items()}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def tested(release: Release, pinned: Mapping[str, Iterable[str]]) -> list[str]:
    """The releases of `release`'s package the checkout pins (any of its distributions)."""
    return sorted({v for n in release.names for v in pinned.get(_norm(n), ())}, key=parse)


def judge(release: Release, version: str | None, pinned: Mapping[str, Iterable[str]]) -> tuple[bool, str]:
    """(refused, words) of one package's version against its release: refused when a point
    that needs it (always) would end unsupported. For `launch doctor`."""
    when = f" {WHEN[release.when]}" if WHEN[release.when] else ""
    runs = tested(release, pinned)
    if version is None:
        return False, f"{release.package} not found{when and ' (needed' + when + ')'}"
    if older(version, release.oldest):
        return (release.when == ALWAYS,
                f"{release.package} {version} is older than {release.oldest}, the oldest supported"
                f"{when} ({release.why})")
    if runs and parse(version) > parse(runs[-1]):
        return False, (f"{release.package} {version} (>= {release.oldest}{when}; "
                       f"newer than any tested: {', '.join(runs)})")
    return False, f"{release.package} {version} (>= {release.oldest}{when}; tested {', '.join(runs) or 'none'})"


def table(adapters: Iterable[Any], root: str = ROOT) -> str:
    """The page's table of supported versions: a row per framework's release, in Markdown."""
    pinned = pins(root)
    rows = ["| framework | package | oldest supported | needed | why | tested here |",
            "|---|---|---|---|---|---|"]
    for a in adapters:
        for r in a.releases:
            rows.append(f"| {a.name} | {r.package} | {r.oldest} | {WHEN[r.when] or 'always'} | "
                        f"{r.why} | {', '.join(tested(r, pinned)) or 'none'} |")
    return "\n".join(rows)
