"""Which container image each point ran in, from its rank records' `container` (the image's
runtime, reference and digest as the submitting side named and hashed it; docs/containers.md),
as analysis.load read them (Results.environments). Two points in different images are not the
same measurement: the report's Environment section, `analysis compare` and `analysis history`
say so through this module.
"""
from typing import Any


def identity(container: dict[str, Any] | None) -> str | None:
    """What tells two images apart: the digest where there is one, else the reference; None
    outside a container."""
    if not container:
        return None
    return container.get("digest") or container.get("image")


def label(container) -> str:
    """`charliecloud /images/pt.sqfs (sha256:0123456789ab)`, or `none` (no container)."""
    if not container:
        return "none"
    digest = container.get("digest")
    short = f"sha256:{digest.split(':', 1)[-1][:12]}" if digest else \
        f"no digest: {container.get('why') or 'unknown'}"
    return f"{container.get('runtime') or '?'} {container.get('image')} ({short})"


def of_points(results) -> dict:
    """(sweep, point) -> its image (the record's `container`, or None), from the first rank
    record read of it; a point whose ranks disagree keeps the first (they share one spec)."""
    out: dict = {}
    for e in results.environments:
        out.setdefault((e["sweep"], e["point"]), e.get("container"))
    return out


def environment_lines(results) -> list:
    """The Environment section's image lines: each image with its points; nothing when no
    point ran in a container."""
    by_image: dict = {}
    for (sweep, point), c in of_points(results).items():
        by_image.setdefault(label(c), []).append(point)
    if set(by_image) <= {"none"}:
        return []
    lines = ["- images (the container each point's ranks ran in):"]
    for name, pts in by_image.items():
        shown = ", ".join(pts[:6]) + (f" and {len(pts) - 6} more" if len(pts) > 6 else "")
        lines.append(f"  {name}: {shown}")
    return lines
