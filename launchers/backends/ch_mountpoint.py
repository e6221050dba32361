"""Each rank's start of `ch-run` on a SquashFS image: its mount point made first, then ch-run.

    python -I -S ch_mountpoint.py DIR ch-run --mount=DIR ... IMAGE -- CMD ...

ch-run (0.31, and upstream through 0.38) makes its default mount point
/var/tmp/$USER.ch/mnt with a stat-then-mkdir per component and dies on EEXIST, so ranks
that start on one node at the same moment (or on nodes sharing /var/tmp) race:
`can't mkdir: /var/tmp/root.ch: File exists`. `ch-run --mount=DIR` takes a directory
"which must already exist" (man ch-run) and makes none; os.makedirs(exist_ok=True) makes it
whoever comes first and takes EEXIST as done. Then this process becomes ch-run (exec), so
srun's signals reach ch-run as before. Run by path with -I -S: the standard library only,
none of the suite's imports before every rank (docs/containers.md).
"""
import os
import sys


def main(argv: list) -> int:
    if len(argv) < 2:
        print("usage: ch_mountpoint.py DIR COMMAND [ARG...]", file=sys.stderr)
        return 2
    folder, command = argv[0], argv[1:]
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        print(f"ch_mountpoint: cannot make ch-run's mount point {folder}: {exc.strerror}",
              file=sys.stderr)
        return 1
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"ch_mountpoint: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
