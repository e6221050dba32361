"""`python -m analysis store ...` and `python -m analysis archive SWEEP`.

    python -m analysis store add PATH...       sweeps (folders, folders of sweeps, archives,
                                               certifications) added to the results store;
                                               the same again changes nothing
    python -m analysis store rebuild PATH...   the store made anew from PATHs (a sweep stored
                                               before that none of them holds is dropped, named)
    python -m analysis store list              the stored sweeps: date, points, folder, archive
    python -m analysis store refresh           every stored Slurm job's state from sacct
    python -m analysis archive SWEEP [--out FILE] [--profiles]
                                               SWEEP.tar.zst (analysis/read/archive.py)

Every store command takes `--store PATH_OR_URL` (else DLBENCH_STORE, the site file's
store.url, the user's data folder: analysis/store/place.py). Exit status: 0; 1 when a record
file of an added sweep was corrupt (its repeat is stored as such); 2 on bad input or a store
that cannot be used, in one line.
"""
import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tabulate import tabulate

from analysis.read import archive
from analysis.read.load import opened
from analysis.read.results import Results
from analysis.store import history
from analysis.store import place as store_place
from analysis.store import rows as store_rows
from analysis.terminal import say
from contract import paths

if TYPE_CHECKING:   # imported where a store is opened: SQLAlchemy's import is a quarter second
    from analysis.store.database import Store


def open_store(explicit: str | None, write: bool, results: Results | None = None) -> "Store":
    from analysis.store import database as store
    where = store_place.configured(explicit, store_place.site_setting(results) if results else None)
    if where is None:
        raise store_place.StoreError("the results store is turned off (--store off or "
                                     f"{store_place.ENV}=off)")
    return store.Store(where, write=write)


def _read(paths_given: Sequence[str]) -> tuple[list[store_rows.Row], list[store_rows.Row], int]:
    """(every sweep of the paths, as store_rows.sweeps made them; every certification, as
    store_rows.certifications made them; how many corrupt files)."""
    made: list[store_rows.Row] = []
    certified: list[store_rows.Row] = []
    corrupt = 0
    for path in paths_given:
        with opened(path, merge=True) as (results, folders):   # each sweep stored as its own
            for m in store_rows.sweeps(results, folders):
                m["archive"] = str(path) if archive.is_archive(path) else None
                made.append(m)
            for c in store_rows.certifications(results, folders):
                c["archive"] = str(path) if archive.is_archive(path) else None
                certified.append(c)
            corrupt += len(results.corrupt)
            for c in results.corrupt:
                print(f"warning: {c['file']}: {c['reason']} (its repeat is stored as corrupt)",
                      file=sys.stderr)
    return made, certified, corrupt


def cmd_add(args: argparse.Namespace) -> int:
    made, certified, corrupt = _read(args.paths)
    st = open_store(args.store, True)
    say("\n".join(f"store {st.name}: {line}" for line in st.add(made, certified)))
    return 1 if corrupt else 0


def cmd_rebuild(args: argparse.Namespace) -> int:
    made, certified, corrupt = _read(args.paths)
    st = open_store(args.store, True)
    say("\n".join(f"store {st.name}: {line}" for line in st.rebuild(made, certified)))
    return 1 if corrupt else 0


def cmd_list(args: argparse.Namespace) -> int:
    st = open_store(args.store, False)
    sweeps = st.sweeps()
    if not len(sweeps):
        say(f"store {st.name}: no sweep stored")
        return 0
    def where(path: object, there: Callable[[str], bool]) -> str:
        return "" if not isinstance(path, str) else path + ("" if there(path) else " (gone)")
    rows = [[history.table_date(s.created_unix), s.key, s.points, str(s.suite_commit or "")[:12],
             where(s.path, os.path.isdir), where(s.archive, os.path.isfile)]
            for s in sweeps.itertuples()]
    say(f"# Sweeps in {st.name}\n" + tabulate(rows, headers=["date", "sweep", "points", "commit",
                                                             "folder", "archive"],
                                              tablefmt="github", disable_numparse=True))
    return 0


def cmd_refresh(args: argparse.Namespace) -> int:
    from analysis.store import database as store
    st = open_store(args.store, True)
    say(f"store {st.name}: " + store.refresh(st))
    return 0


def cmd_archive(args: argparse.Namespace) -> int:
    out, manifest = archive.write(args.sweep, args.out, profiles=args.profiles)
    left, masked, withheld = manifest["left_out"], manifest["masked"], manifest["withheld"]
    say(f"archive: {out}: {len(manifest['files'])} files, {os.path.getsize(out):,} bytes"
        + (f"; left out (--profiles to keep): {', '.join(left)}" if left else "")
        + (f"\nsecrets masked (a sweep written before they were; {paths.ARCHIVE_MANIFEST}'s "
           f"`masked`): {', '.join(masked)}" if masked else "")
        + (f"\nleft out, binary files holding a secret: {', '.join(withheld)}" if withheld else ""))
    return 0


def store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", help="the results store: a SQLite file or a URL, or off "
                                        f"(default: ${store_place.ENV}, the site file's "
                                        "store.url, ~/.local/share/dlbench/results.sqlite)")


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """The `store` and `archive` subcommands of `python -m analysis`."""
    st = sub.add_parser("store", help="the results store: add, rebuild, list, refresh")
    what = st.add_subparsers(dest="store_command", required=True)
    for name, text in (("add", "add sweeps (folders or archives) to the store"),
                       ("rebuild", "make the store anew from these sweeps")):
        p = what.add_parser(name, help=text)
        p.add_argument("paths", nargs="+", help="sweep folders, folders of sweeps, archives")
        store_option(p)
    for name, text in (("list", "the stored sweeps"),
                       ("refresh", "the stored Slurm jobs' states, from sacct")):
        store_option(what.add_parser(name, help=text))
    ar = sub.add_parser("archive", help="one SWEEP.tar.zst with every file's sha256")
    ar.add_argument("sweep", help="a sweep folder")
    ar.add_argument("--out", help="the archive to write (default SWEEP.tar.zst)")
    ar.add_argument("--profiles", action="store_true", help="keep profile=true's traces")


def cmd_store(args: argparse.Namespace) -> int:
    return {"add": cmd_add, "rebuild": cmd_rebuild, "list": cmd_list,
            "refresh": cmd_refresh}[args.store_command](args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"store": cmd_store, "archive": cmd_archive}

