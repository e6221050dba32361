"""What matches what, written once: a point's settings against a reference entry's
(analysis/gate/compare.py) or a published row's (analysis/published/sources.py, layouts.py),
and a device name against a peak's (analysis/peaks.yaml) or a published figure's. So a
point matches a row in every table or in none.

A value (`same`) matches another
- as numbers where both are (1000.0 from a DataFrame is 1000 from a file; numpy scalars
  as their Python values);
- as booleans where both are: true is true, and never 1 (a boolean and a number differ);
- else as text, case-insensitively: "AMP" is amp, "2048" is 2048, "true" is true;
- None (not stated) only as None: a caller that lets an unstated setting pass says so.

A device name ("NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-16GB", "NVIDIA H100 80GB HBM3",
"A100 40GB") becomes three facts (`device_key`):

- family: the first word that is one or two letters and one to three digits with at
  most one letter after them (A100, H100, H200, GH200, V100, V100S, L40S, L4, A10, A10G,
  T4), upper-cased; None when there is none (a CPU, "cpu");
- form: "sxm" (SXM2/SXM4/SXM5, or HBM3/HBM3e memory: the H100 SXM part names its memory,
  not its socket, "NVIDIA H100 80GB HBM3"; or a family whose name alone is its SXM part:
  the driver calls the H200 SXM "NVIDIA H200" and the other part "NVIDIA H200 NVL"),
  "pcie", "nvl", or None when the name says nothing;
- memory_gb: the number before "GB", or None.

Two names are the same device (`same_device`) when their families are equal and their form and memory
agree wherever both names state them: "NVIDIA A100-SXM4-40GB" is an "A100 40GB" and an
"A100", never an "A100 80GB" or an "A100 PCIe"; "Tesla V100 16GB" (no form) matches the
SXM2 and the PCIe V100 of 16 GB.
"""
import re
from typing import NamedTuple, Optional

from contract import values

_FAMILY = re.compile(r"[A-Z]{1,2}\d{1,3}[A-Z]?")
_MEMORY = re.compile(r"(\d+)\s*GB\b")
# Families whose name with no form is their SXM part (their other parts say NVL).
_BARE_IS_SXM = {"H200", "B200"}


class DeviceKey(NamedTuple):
    family: Optional[str]
    form: Optional[str]
    memory_gb: Optional[int]


def device_key(name) -> DeviceKey:
    """The normalised facts of a device name (all None for no name)."""
    if not name or not isinstance(name, str):
        return DeviceKey(None, None, None)
    text = name.upper()
    words = re.split(r"[^A-Z0-9]+", text)
    family = next((w for w in words if _FAMILY.fullmatch(w)), None)
    if any(w.startswith("SXM") or w.startswith("HBM3") for w in words):
        form: str | None = "sxm"
    elif "PCIE" in words:
        form = "pcie"
    elif "NVL" in words:
        form = "nvl"
    else:
        form = "sxm" if family in _BARE_IS_SXM else None
    memory = _MEMORY.search(re.sub(r"[-_]", " ", text))
    return DeviceKey(family, form, int(memory.group(1)) if memory else None)


def same_device(a, b) -> bool:
    """Whether two device names (or DeviceKeys) name the same device (see the module)."""
    ka = a if isinstance(a, DeviceKey) else device_key(a)
    kb = b if isinstance(b, DeviceKey) else device_key(b)
    if ka.family is None or ka.family != kb.family:
        return False
    return all(x is None or y is None or x == y
               for x, y in ((ka.form, kb.form), (ka.memory_gb, kb.memory_gb)))


def same(a, b) -> bool:
    """Whether two settings are the same value (see the module)."""
    a, b = (v.item() if hasattr(v, "item") else v for v in (a, b))
    if a is None or b is None:
        return a is b
    if isinstance(a, str) or isinstance(b, str):
        return str(a).lower() == str(b).lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if values.is_number(a) and values.is_number(b):
        return a == b
    return str(a).lower() == str(b).lower()
