"""`python -m launch ...` and `python -m analysis ...` as a user runs them, from the repository
root, in the suite's Python: the one copy the integration tests share."""
import os
import subprocess
import sys

from launchers.suite import ROOT


def launch(*args, env=None, timeout=900):
    """A launch command; ranks get one thread each (2 shared cores: no oversubscription)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "launch", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=env)


def analysis(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def rank_records(root, points: str) -> list:
    """The rank records of repeat 0 of the points whose folder name matches `points` (a glob),
    by rank."""
    import glob
    import json
    paths = sorted(glob.glob(f"{root}/points/{points}/repeat-00/rank-*.json"))
    return [json.load(open(p)) for p in paths]


def losses(record) -> list:
    return [s["loss"] for s in record["steps"]]
