"""`python -m launch certify smoke` on the real Slurm test cluster (3 nodes of 2 CPUs; no mock
of Slurm or a framework; docs/certify.md): a certification recorded with no baseline, the
same against it with a loose threshold (PASS), its record judged again at threshold 1.5
(every item FAIL, nothing measured again), a node's port throttled to 40 Mbit/s both ways
(the health gate names it, nothing is measured), the archive checked against its manifest,
the results store's history. One recorded certification serves every judging variant; the
whole module costs some 90 to 120 s of this machine (docs/certify.md, "Tests")."""
import hashlib
import json
import os
import subprocess
import time

import pytest

from analysis.read import archive
from contract import paths
from tests.launching import analysis, launch

pytestmark = [pytest.mark.slurm, pytest.mark.quiet]   # the health gate times links
SLOW = "node2"


def certify(tmp_path, *args):
    """The command, its folder's verdict.json (None when it wrote none) and its seconds."""
    t0 = time.monotonic()
    r = launch("certify", "smoke", *args, env={"DLBENCH_STORE": str(tmp_path / "store.sqlite")},
               timeout=900)
    wall = time.monotonic() - t0
    folder = next((a.split("=", 1)[1] for a in args if a.startswith("certify.dir=")), None)
    found = os.path.join(folder, paths.VERDICT_FILE) if folder else None
    verdict = json.load(open(found)) if found and os.path.exists(found) else None
    print(f"certify smoke {' '.join(args)}: exit {r.returncode} in {wall:.0f} s")
    return r, verdict, wall


def lines_of(stdout: str) -> dict:
    """item -> its table rows' cells (the verdict table the command prints)."""
    out = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 8 and cells[0] != "item":
            out.setdefault(cells[0], []).append(cells)
    return out


@pytest.fixture(scope="module")
def recorded(slurm_cluster, tmp_path_factory):
    """`certify smoke certify.baseline=none`: the record every judging test sets itself against."""
    tmp = tmp_path_factory.mktemp("certify")
    r, verdict, wall = certify(tmp, "certify.baseline=none", f"certify.dir={tmp / 'first'}")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    return tmp, r, verdict


def test_a_certification_without_baseline_records_every_item(recorded):
    tmp, r, verdict = recorded
    assert verdict["verdict"] == "RECORDED" and verdict["exit_code"] == 0
    assert verdict["health"]["ok"] and verdict["health"]["hosts"] == ["node1", "node2", "node3"]
    items = {(i["item"], i["nodes"]): i for i in verdict["items"]}
    assert set(items) == {("resnet50", 1), ("resnet50", 3), ("bert", 1), ("bert", 3),
                          ("all_reduce", 3), ("checkpoint", 3)}
    for i in items.values():
        assert i["verdict"] == "MEASURED" and i["status"] == "ok" and i["measured"] > 0, i
        assert i["provenance"]["framework"] == "pytorch" and i["provenance"]["framework_version"]
        assert len(i["provenance"]["hosts"]) == i["nodes"]   # the nodes it ran on
    assert items[("all_reduce", 3)]["unit"] == "GB/s" and items[("all_reduce", 3)]["config"]["op"] == "all_reduce"
    assert len(lines_of(r.stdout)) == 4 and "## Certification smoke: RECORDED (exit 0)" in r.stdout


def test_against_the_record_with_a_loose_threshold_every_item_passes(recorded):
    tmp, _, first = recorded
    second = tmp / "second"
    # loose: a tiny checkpoint's GB/s is its fsyncs' latency on a shared disk, which once ran 12x
    # slower than the first certification's (0.00087 against 0.0104 GB/s: FAIL at 0.1)
    r, verdict, wall = certify(tmp, f"certify.baseline={tmp / 'first'}", "certify.threshold=0.01",
                               f"certify.dir={second}")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    assert verdict["verdict"] == "PASS" and verdict["counts"]["PASS"] == 6
    by_point = {i["point"]: i for i in first["items"]}
    for i in verdict["items"]:   # measured anew, each set against the first's figure of its point
        assert i["verdict"] == "PASS" and i["baseline"] == pytest.approx(by_point[i["point"]]["measured"], rel=1e-5)
        assert i["ratio"] == pytest.approx(i["measured"] / i["baseline"], rel=1e-9)
    rows = lines_of(r.stdout)
    assert all(cells[-1] == "PASS" for item in rows.values() for cells in item)
    # the archive: one .tar.zst, each file's sha256 in its manifest, and it verifies
    out = str(second) + paths.ARCHIVE_SUFFIX
    assert f"archive: {out}:" in r.stdout and "verified" in r.stdout
    with archive.unpacked(out) as (folder, damaged):
        assert damaged == {}
        manifest = json.load(open(os.path.join(folder, paths.ARCHIVE_MANIFEST)))
    assert {paths.VERDICT_FILE, verdict["health"]["file"]} <= set(manifest["files"])
    assert any(f.startswith("checkpoint/points/") and f.endswith("/rank-00002.json") for f in manifest["files"])
    extracted = tmp / "extracted"   # and by tar and zstd alone, as a site's reader would
    extracted.mkdir()
    subprocess.run(["tar", "--zstd", "-xf", out, "-C", str(extracted)], check=True)
    for rel, entry in manifest["files"].items():
        data = (extracted / "second" / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], rel
    # the results store: both certifications in the history
    h = analysis("history", "--store", str(tmp / "store.sqlite"))
    assert h.returncode == 0, h.stderr
    lines = [line for line in h.stdout.splitlines() if "| smoke " in line]
    assert [line.split("|")[3].strip() for line in lines] == ["RECORDED", "PASS"], h.stdout


def test_the_record_judged_at_threshold_one_and_a_half_fails_every_item(recorded):
    """The second certification's folder again, against its own archive: every point is
    recorded, so nothing is measured anew (only the health gate runs), and every ratio is 1
    (tiny models on 2 shared cores vary up to 1.5x between runs: against the first run, one
    would pass now and then); at 1.5 every item fails."""
    tmp, _, _ = recorded
    second = tmp / "second"
    if not (second / paths.VERDICT_FILE).exists():
        pytest.skip("the passing certification did not run")
    runs = sorted(second.glob("*/points/*/repeat-00/run.json"))
    before = [p.stat().st_mtime for p in runs]
    r, verdict, wall = certify(tmp, f"certify.baseline={second}{paths.ARCHIVE_SUFFIX}",
                               "certify.threshold=1.5", f"certify.dir={second}")
    assert r.returncode == 1, r.stdout[-4000:] + r.stderr[-3000:]
    assert verdict["verdict"] == "FAIL" and verdict["counts"]["FAIL"] == 6
    assert verdict["baseline"]["kind"] == "archive"
    gate = second / verdict["health"]["file"]   # its own gate, run now: not the last run's
    assert verdict["health"]["ok"] and gate.stat().st_mtime > time.time() - wall
    assert len(list(second.glob(f"{paths.HEALTH_RUN_PREFIX}*"))) == 2
    assert [p.stat().st_mtime for p in runs] == before   # judged, not measured again
    assert all(i["ratio"] == pytest.approx(1, rel=1e-5) for i in verdict["items"])
    cells = [c for item in lines_of(r.stdout).values() for c in item]
    assert len(cells) == 6 and all(c[-1].startswith("FAIL") and "-" not in c[3:6] for c in cells)


def test_a_node_throttled_both_ways_fails_the_certification_named(recorded, slurm_cluster):
    tmp, _, _ = recorded
    with slurm_cluster.throttled(SLOW, "40mbit"):
        r, verdict, wall = certify(tmp, f"certify.baseline={tmp / 'first'}", f"certify.dir={tmp / 'sick'}")
    assert r.returncode == 1, r.stdout[-4000:] + r.stderr[-3000:]
    assert list(verdict["health"]["sick"]) == [SLOW], verdict["health"]
    assert f"health gate: FAIL: {SLOW} (links: sends slowly and receives slowly" in r.stdout
    assert {i["verdict"] for i in verdict["items"]} == {"NOT RUN"}   # nothing measured on it
    assert not list((tmp / "sick").glob("*/points"))
    with archive.unpacked(str(tmp / "sick") + paths.ARCHIVE_SUFFIX) as (_, damaged):
        assert damaged == {}
    assert wall < 120, wall
