"""The results store's scenario, the same on SQLite (tests/unit/test_results_store.py) and on
a real PostgreSQL (tests/integration/test_results_store_postgres.py): two sweeps reported,
the first one's folder deleted, a third sweep set against what is stored."""
import json
import os
import shutil

from analysis.__main__ import main
from contract import paths, records
from tests.sweepfiles import write_point, write_repeat

POINT = "000-pytorch-resnet50-fp32-1x1-bs8"
DAY = 86400.0
T0 = 1_790_000_000.0   # 2026-09-21 (UTC)


def sweep(root, name, created, windows, commit="c0ffee", point=POINT, **kw) -> str:
    """A sweep of one point, pytorch resnet50 1x1 bs8, a repeat per window: 10 timed steps
    of 8 samples in `window` seconds, 80 / window samples/s (tests/sweepfiles.py)."""
    folder = os.path.join(str(root), name)
    p = write_point(folder, point, repeats=len(windows), **kw)
    for k, w in enumerate(windows):
        write_repeat(p, k, [w] * p["world_size"])
    path = os.path.join(p["dir"], paths.POINT_FILE)
    with open(path) as f:
        data = json.load(f)
    records.write_json_atomic(path, dict(data, created_unix=created, suite_commit=commit))
    return folder


def run(capsys, *argv):
    """python -m analysis ARGV in this process: (exit status, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def two_sweeps_one_deleted(root, store, capsys):
    """Sweeps A (80 samples/s, 2026-09-21) and B (100, a day later) reported into `store`,
    A's folder deleted; C (80, two days later) is not reported. Checks history and compare
    and returns C's folder."""
    a = sweep(root, "A", T0, [1.0, 1.0])
    b = sweep(root, "B", T0 + DAY, [0.8, 0.8], commit="beef")
    c = sweep(root, "C", T0 + 2 * DAY, [1.0, 1.0])
    for s in (a, b):
        code, out, err = run(capsys, "report", s, "--no-plot", "--store", store)
        assert code == 0, err
        assert f"added {os.path.basename(s)}@" in out
    shutil.rmtree(a)

    code, out, err = run(capsys, "history", "--store", store)
    assert code == 0, err
    assert "## pytorch resnet50 (tiny) fp32 1x1 bs8" in out
    lines = [line for line in out.splitlines() if line.startswith("| 2026")]
    assert [line.split("|")[2].strip() for line in lines] == ["A", "B"]
    assert "80.0 (80.0..80.0)" in lines[0] and "100.0 (100.0..100.0)" in lines[1]
    assert "+25.0% !" in lines[1]          # 100 / 80 - 1, beyond A's range

    code, out, _ = run(capsys, "history", "--store", store, "--since", "2026-09-22")
    assert "| B " in out and "| A " not in out
    code, out, _ = run(capsys, "history", "--store", store, "--where", "framework=pytorch",
                       "devices=1", "--sweep", "A")
    assert "| A " in out and "| B " not in out
    code, out, _ = run(capsys, "history", "--store", store, "--where", "framework=jax")
    assert code == 0 and "no training point" in out

    # C against the last good run stored before it (B: 100), then against A, whose folder is gone
    code, out, err = run(capsys, "compare", c, "--reference", "store", "--store", store)
    assert code == 1, err
    assert "[stored: B 2026-09-22" in out and "| 80 " in out and "100 samples/s" in out
    assert "-20.0%" in out and "FAIL" in out
    code, out, err = run(capsys, "compare", c, "--reference", "store:A", "--store", store)
    assert code == 0, err
    assert "[stored: A 2026-09-21" in out and "+0.0%" in out and "PASS" in out
    return c
