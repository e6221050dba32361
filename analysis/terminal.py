"""What the analysis prints to the terminal, and a reader that goes away.

`python -m analysis report SWEEP | head` closes the pipe after ten lines: the report still
writes its CSV, Parquet, plots and page, and exits as it would have, without a traceback.
"""
import os
import sys


def say(text: str) -> None:
    """Print to stdout. A reader that went away (BrokenPipeError) ends the printing, not the
    work: the rest of the output goes to /dev/null."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
