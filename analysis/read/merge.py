"""One read is one sweep, or one certification with its items' sweeps, unless a merge is asked
for (docs/report.md, "A folder of sweeps"): a folder that holds several (outputs/, /tmp) is
refused, naming them, rather than read as one sweep whose report mixes unrelated runs."""
import os

from analysis.read.record_file import RecordError
from contract import paths

SHOWN = 5   # names in the refusal's line; the rest counted


class SeveralSweeps(RecordError):
    """A folder of several sweeps read without a merge asked for; `units` names them."""

    def __init__(self, root: str, units: list, how: str = "merge=True"):
        self.root, self.units, self.how = root, units, how
        names = [os.path.relpath(u, root) for u in units]
        shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
        super().__init__(f"{root} holds {len(units)} sweeps ({shown}): name one, or ask for "
                         f"their merge ({how})")

    def asking(self, how: str) -> "SeveralSweeps":
        """The same refusal naming another way to ask (a command's flag)."""
        return SeveralSweeps(self.root, self.units, how)


def units(root, point_files: list) -> list:
    """The sweeps under root, sorted: each certification (its items' sweeps are its own) and
    each sweep outside any certification."""
    certs = [os.path.dirname(f) for f in paths.certification_files(root)]
    sweeps = {paths.sweep_of(os.path.dirname(f)) for f in point_files}
    alone = [s for s in sweeps if not any(s == c or s.startswith(c + os.sep) for c in certs)]
    return sorted(certs + alone)


def check(root, point_files: list, merge: bool) -> None:
    """SeveralSweeps where root holds more than one sweep and no merge was asked for."""
    if merge:
        return
    found = units(root, point_files)
    if len(found) > 1:
        raise SeveralSweeps(os.path.normpath(str(root)), found)
