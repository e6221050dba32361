"""A sweep written before the secret rule (contract/secrets.py): its secrets found, and each
of its files masked as `python -m analysis archive` packs it (analysis/read/archive.py).

Such a sweep's point.json files and multirun.yaml give its secrets away (cluster.env's tokens,
store.url's password, the overrides that set them); the values are then searched for in
every file:
- a JSON file is masked by the rule, field by field, and the fields are named in the
  archive's manifest (`masked`); where a masked field is one the figures may read (not
  under `cluster`, the overrides, an environment, an argument list, an error or a log tail),
  the archive is refused, naming the file and the field: masking would change figures;
- any other text (multirun.yaml, logs, the sbatch script) has the values masked;
- a binary file that holds one (a pickle of submitit's) is left out (`withheld`): masking
  its bytes would break it, and the analysis reads none.
A sweep written since holds none of them: nothing is masked and its files go in as they are.
"""
import glob
import json
import os

import yaml

from analysis.read.record_file import RecordError
from contract import paths, secrets

# What the figures never read: a masked field under one of these changes none of them.
FIGURE_FREE = frozenset({"cluster", "overrides", "environment", "env", "argv", "error",
                         "log_tail", "hydra"})
TEXT = "(text)"   # the manifest's word for a text file whose secret values were masked


def known_values(sweep: str) -> set:
    """The secret values the sweep's point.json files and multirun.yaml hold."""
    known = set()
    for path in paths.point_files(sweep) + glob.glob(os.path.join(sweep, "multirun.yaml")):
        try:
            with open(path) as f:
                known |= secrets.found(json.load(f) if path.endswith(".json") else yaml.safe_load(f))
        except (OSError, ValueError, yaml.YAMLError):
            continue   # a bad file costs its repeat when read, not the archive
    return known


class Masking:
    """The sweep's files as the archive packs them: `file(rel, data)` -> (the bytes to pack,
    or None to leave the file out; what was masked)."""

    def __init__(self, sweep: str):
        self.known = known_values(sweep)
        self._needles = [v.encode() for v in self.known if len(v) >= secrets.MIN_KNOWN]

    def __bool__(self) -> bool:
        return bool(self.known)

    def file(self, rel: str, data: bytes):
        if rel.endswith(".json"):
            try:
                obj = json.loads(data)
            except ValueError:
                obj = None   # a torn record: masked as text below, and still corrupt when read
            if obj is not None:
                masked, where = secrets.changes(obj, values=self.known)
                for field in where:
                    if not FIGURE_FREE.intersection(field.split(".")):
                        raise RecordError(
                            f"cannot archive {rel} without its secret in {field}: masking it "
                            "would change what the figures read (contract/secrets.py)")
                return (json.dumps(masked, indent=1).encode(), where) if where else (data, [])
        if not any(n in data for n in self._needles):
            return data, []
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return None, []   # binary: left out whole
        return secrets.mask_text(text, values=self.known).encode(), [TEXT]
