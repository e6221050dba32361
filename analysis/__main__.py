"""python -m analysis report PATH [--out DIR] [--no-plot]
python -m analysis compare PATH --reference FILE      the regression gate (analysis/compare.py)
python -m analysis reference PATH --out FILE          a reference file from a past run

Prints the tables, and writes points.csv, runs.csv, steps.csv and the speedup
plots to DIR (default PATH/report)."""
import argparse
import os
import sys

from analysis import comm, compare, load, plot, report
from analysis.load import RecordError


def cmd_report(args) -> int:
    results = load(args.path)
    print(report.render(results))
    comm_table = comm.load_comm(args.path)  # bench=comm points, if any (docs/comm.md)
    if len(comm_table):
        print(comm.render_comm(comm_table))
    out = args.out or os.path.join(args.path, "report")
    try:
        os.makedirs(out, exist_ok=True)
        for name in ("points", "runs", "steps"):
            getattr(results, name).to_csv(os.path.join(out, f"{name}.csv"), index=False)
        written = [] if args.no_plot else plot.speedup_plots(results.points, out)
        if len(comm_table):
            comm_table.to_csv(os.path.join(out, "comm.csv"), index=False)
            written += [] if args.no_plot else comm.busbw_plots(comm_table, out)
    except OSError as exc:
        raise RecordError(f"cannot write the report to {out}: {exc.strerror or exc}") from None
    print(f"tables: {out}/points.csv, runs.csv, steps.csv" +
          "".join(f"\nplot: {p}" for p in written))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="tables, CSV and plots of a sweep")
    rep.add_argument("path", help="a sweep folder (or a folder of sweeps)")
    rep.add_argument("--out", help="where CSV and PNG go (default PATH/report)")
    rep.add_argument("--no-plot", action="store_true")
    compare.add_commands(sub)
    args = parser.parse_args(argv)
    try:
        return {"report": cmd_report, **compare.COMMANDS}[args.command](args)
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
