"""python -m analysis report PATH [--out DIR] [--no-plot] [--merge] [--max-cv 0.05] [--max-drift 0.05]
python -m analysis compare PATH --reference FILE      the regression gate (analysis/gate/compare.py)
python -m analysis compare PATH --reference published:NAME    against a published source
python -m analysis reference PATH --out FILE          a reference file from a past run
python -m analysis history [ROOT] [--where K=V ...] [--since DATE] [--sweep NAME]
                                                      each configuration across the sweeps of
                                                      the results store, or under ROOT
                                                      (analysis/store/history.py)
python -m analysis store add|rebuild|list|refresh     the results store (analysis/store/commands.py)
python -m analysis archive SWEEP                      SWEEP.tar.zst (analysis/read/archive.py)

PATH may be a sweep's archive (SWEEP.tar.zst): it is read without unpacking it by hand, and
a report of it goes to ARCHIVE-report/ beside it unless --out says otherwise. PATH is one
sweep or one certification: a folder of several is refused, naming them, unless --merge asks
for one report over all (analysis/read/merge.py); a merge's sweeps go to the results store
each as its own sweep, as `store add` adds them.

`report` prints the tables, and writes points.csv, runs.csv, steps.parquet (one row per
rank per step; pandas.read_parquet reads it), comm.csv where there are bench=comm points,
the plots (analysis/plots/draw.py; each one the sweep has no data for is skipped with a line
saying so; --no-plot: none, nor in the page), and report.html (the summary and the plots
first, one table per model, the details folded: one self-contained file to mail;
docs/report.md; --html PATH puts it elsewhere) to DIR
(default PATH/report). --max-cv and --max-drift set the flags'
thresholds (analysis/figures/method.py: a CV across repeats, a drift between the timed window's
halves, above which a figure is marked; 5% each by default). Then it adds the sweep to the
results store (analysis/store/keeper.py; --store off: not); a store that cannot be written
is a warning line, and the report's files are written all the same.

A bad record file (torn, garbage, of a foreign schema or of a newer schema version) costs
only its repeat, which the report marks `corrupt`; its failure section lists every such
file. Exit status of `report`: 0; 1 when any corrupt file was found (everything else is
still reported and written); 2 on bad input (no sweep at PATH, a report folder it cannot
write), said in one line.
"""
import argparse
import concurrent.futures
import contextlib
import gc
import os
import sys

from analysis.figures import method
from analysis.figures.comm import comm_table as comm_table_of
from analysis.gate import compare
from analysis.plots import data as plot_data
from analysis.plots.process import Plotter
from analysis.read import archive
from analysis.read.load import load, opened
from analysis.read.merge import SeveralSweeps
from analysis.read.record_file import RecordError
from analysis.report import contents, page
from analysis.sections.main_tables import limits_of
from analysis.store import commands as store_commands
from analysis.store.keeper import Keeper
from analysis.terminal import say
from contract import paths, secrets


def cmd_report(args) -> int:
    # the plots' process starts first: it imports matplotlib while the records are read
    plotter = None if args.no_plot else Plotter()
    keeper = Keeper(args.store)   # imports the store's library beside the parse
    try:
        with opened(args.path, max_cv=args.max_cv, max_drift=args.max_drift, ahead_ok=True,
                    merge=args.merge) as (results, folders):
            return _report(args, plotter, results, lambda: keeper.submit(
                results, folders, args.path if archive.is_archive(args.path) else None), keeper)
    finally:
        keeper.close()
        if plotter is not None:
            plotter.close()


@contextlib.contextmanager
def _writing(out):
    """A file of the report that cannot be written: one line naming it (exit 2)."""
    try:
        yield
    except OSError as exc:
        raise RecordError(f"cannot write the report to {exc.filename or out}: "
                          f"{exc.strerror or exc}") from None


def _report(args, plotter, results, to_store, keeper) -> int:
    comm_table = comm_table_of(results)  # bench=comm points, if any (docs/comm.md)
    if plotter is not None:   # drawn beside the tables, from the aggregated frames
        plotter.draw(results, comm_table)
    out = args.out or (archive.report_dir(args.path) if archive.is_archive(args.path)
                       else os.path.join(args.path, paths.REPORT_DIR))
    with _writing(out):
        os.makedirs(out, exist_ok=True)
    # steps.parquet in a thread (pyarrow's writer and its compression let go of the GIL): it
    # overlaps the tables here and the wait for the plots
    steps = concurrent.futures.ThreadPoolExecutor(1)
    parquet = steps.submit(results.write_steps, os.path.join(out, "steps.parquet"))
    steps.shutdown(wait=False)
    to_store()   # the store's rows handed to its process: added while the tables are printed
    parts = contents.sections(results, comm_table)
    say(contents.text(parts))
    with _writing(out):
        for name in ("points", "runs"):
            getattr(results, name).to_csv(os.path.join(out, f"{name}.csv"), index=False)
        if len(comm_table):
            comm_table.to_csv(os.path.join(out, "comm.csv"), index=False)
        plots, skipped, written = [], ["plots skipped (--no-plot)"], []
        if plotter is not None:
            plots, skipped = plotter.result()
            written = plot_data.write(plots, out)
        parquet.result()
        html = page.write(args.html or os.path.join(out, "report.html"),
                          args.path, parts, plots, skipped, limits=limits_of(results))
    say(f"tables: {out}/points.csv, runs.csv, steps.parquet\npage: {html}" +
          "".join(f"\nplot: {p}" for p in written) + "".join(f"\n{line}" for line in skipped))
    stored, ok = keeper.result()
    if stored:
        say(stored) if ok else print(f"warning: {stored}", file=sys.stderr)
    if results.corrupt:
        print(f"error: {len(results.corrupt)} corrupt record file(s); their repeats are marked "
              "corrupt and listed under 'Failed, cut short or missing'", file=sys.stderr)
        return 1
    return 0


def cmd_history(args) -> int:
    from analysis.store import history
    from analysis.store import rows as store_rows
    corrupt, where = [], dict(_pair(w) for w in args.where or ())
    if args.root is None:
        st = store_commands.open_store(args.store, False)
        pts = history.stored_points(st.points(columns=set(history.STORED) | set(where)))
        certified: history.Certifications = st.certifications()
    else:
        results = load(args.root, merge=True)   # across sweeps: history's purpose
        pts, corrupt = history.points_of(results), results.corrupt
        certified = store_rows.certifications(results)
    certified = [] if where or args.sweep else history.certifications(certified, args.since)
    say("\n\n".join(filter(None, [history.render_certifications(certified), history.render(
        history.table(history.select(pts, where, args.since, args.sweep)))])))
    return 1 if corrupt else 0


def _pair(text: str) -> tuple:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise RecordError(f"--where {text}: expected KEY=VALUE (framework=pytorch)")
    return key, value


def _fraction(text) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"a fraction >= 0 (0.05 = 5%), got {text!r}")
    return value


def report_arguments(rep) -> None:
    """The report command's arguments (analysis/read/ahead.py reads its PATH from the command
    line before they are parsed: tests/unit/test_read_ahead.py keeps the two alike)."""
    rep.add_argument("path", help="a sweep folder, a certification's or an archive")
    rep.add_argument("--out", help="where CSV, Parquet and PNG go (default PATH/report)")
    rep.add_argument("--no-plot", action="store_true", help="no PNG plots (nor in the page)")
    rep.add_argument("--html", help="where report.html goes (default DIR/report.html)")
    rep.add_argument("--merge", action="store_true",
                     help="PATH holds several sweeps: one report over all of them")
    rep.add_argument("--max-cv", type=_fraction, default=method.MAX_CV,
                     help="flag a figure whose CV across repeats is above this (default 0.05)")
    rep.add_argument("--max-drift", type=_fraction, default=method.MAX_DRIFT,
                     help="flag a figure whose timed window's halves differ by more (default 0.05)")
    store_commands.store_option(rep)


def main(argv=None) -> int:
    with secrets.masked_output(sys.argv[1:] if argv is None else argv):   # contract/secrets.py
        return command(argv)


def command(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis")
    sub = parser.add_subparsers(dest="command", required=True)
    report_arguments(sub.add_parser("report", help="tables, CSV, Parquet and plots of a sweep"))
    hist = sub.add_parser("history", help="each configuration's throughput across sweeps")
    hist.add_argument("root", nargs="?", help="a folder of sweeps (default: the results store)")
    hist.add_argument("--where", nargs="+", metavar="KEY=VALUE",
                      help="only points whose KEY is VALUE: framework=pytorch model=resnet50")
    hist.add_argument("--since", metavar="DATE", help="only sweeps from DATE on (2026-10-01, UTC)")
    hist.add_argument("--sweep", help="only this sweep (its name, path, key or archive)")
    store_commands.store_option(hist)
    compare.add_commands(sub)
    store_commands.add_commands(sub)
    args = parser.parse_args(argv)
    try:
        return {"report": cmd_report, "history": cmd_history, **compare.COMMANDS,
                **store_commands.COMMANDS}[args.command](args)
    except SeveralSweeps as exc:
        print(f"error: {exc.asking('--merge')}", file=sys.stderr)
        return 2
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # what the imports made (pandas, numpy: some 70,000 objects) set aside from the cyclic
    # collector for good: its passes over them at exit cost a tenth of a second at a million
    # step records, and the report's forked plots process then copies none of them
    gc.freeze()
    sys.exit(main())
