"""`python -m launch certify`: bad input is one line and exit status 2 before anything runs
(certify/command.py); a certification's points judged from records written by hand
(certify/judge.py: the measured figure, the baseline the one matcher finds, the verdict, the
provenance), and its verdict.json leading the report and listed by the results store's
history. The command's runs on the Slurm test cluster: tests/integration/test_certify_slurm.py."""
import os

import pytest
import yaml

import launch
from analysis.read.load import load
from analysis.report import contents
from certify import baselines, judge, run
from certify import suite as suites
from contract import paths, records
from launchers import sweepdir
from tests.sweepfiles import write_repeat

# a suite of this machine: tiny points, planned with the local launcher (nothing runs here)
TINY = {"system": {"launcher": "local", "cluster": "local"},
        "common": ["model.size=tiny", "repeats=1"],
        "items": [{"name": "resnet", "overrides": ["model=resnet50", "batch_size=4"], "nodes": [1],
                   "metric": "throughput", "published": {"none": "a CPU"}},
                  {"name": "bert", "overrides": ["model=bert_base", "batch_size=4"], "nodes": [1],
                   "metric": "throughput", "threshold": 0.5, "published": {"none": "a CPU"},
                   "note": "tiny"},
                  {"name": "broken", "overrides": ["model=resnet50", "batch_size=8"], "nodes": [1],
                   "metric": "throughput", "published": {"none": "a CPU"}}]}


@pytest.fixture
def conf(tmp_path, monkeypatch):
    """A folder of suites in place of conf/certify: `tiny` above, and the shipped smoke."""
    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    (folder / "smoke.yaml").write_text(open(os.path.join(suites.SUITES, "smoke.yaml")).read())
    monkeypatch.setattr(suites, "SUITES", str(folder))
    return folder


def certify(capsys, *argv):
    code = launch.main(["certify", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("argv, line", [
    (["nosuch"], "error: unknown suite 'nosuch' (there are: smoke, tiny; each is "),
    ([], "error: usage: python -m launch certify SUITE [key=value ...] (suites: smoke, tiny)"),
    (["tiny", "colour=red"], "error: unknown key 'colour' (valid: nodes, gpus_per_node, launcher, cluster, "
                             "certify.baseline, certify.threshold, certify.dir, certify.store, health.*)"),
    (["tiny", "certify.threshold=0"], "error: certify.threshold must be a number > 0 (0.95: within 5% of the "
                                      "baseline), got '0'"),
    (["tiny", "certify.threshold=-0.5"], "error: certify.threshold must be a number > 0"),
    (["tiny", "certify.threshold=fast"], "error: certify.threshold must be a number > 0"),
    (["tiny", "nodes=0"], "error: nodes must be an integer >= 1, got '0'"),
    (["tiny", "nodes=2"], "error: health gate: launcher=local runs on one node; nodes=2 needs launcher=slurm"),
    (["tiny", "health.min_fraction=2"], "error: health gate: "),
    (["tiny", "certify.baseline=published"], "error: certify.baseline=published matches no item: its items name no published row"),
    (["smoke", "certify.baseline=nowhere"], "error: certify.baseline=nowhere: not published, none, a folder"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(conf, capsys, tmp_path, argv, line):
    code, out, err = certify(capsys, *argv, *([f"certify.dir={tmp_path / 'c'}"] if argv else []))
    assert code == 2 and err.startswith(line) and err.count("\n") == 1, err
    assert out == "" and not (tmp_path / "c").exists()


def test_a_baseline_that_matches_no_item_is_refused_before_anything_runs(conf, capsys, tmp_path):
    ref = tmp_path / "gpt.yaml"
    ref.write_text(yaml.safe_dump({"schema": "dlbench.reference", "version": 1, "system": "x", "entries": [
        {"config": {"model": "gpt", "nodes": 1}, "metric": "throughput", "value": 10.0}]}))
    code, out, err = certify(capsys, "tiny", f"certify.baseline={ref}", f"certify.dir={tmp_path / 'c'}")
    assert code == 2 and err == (f"error: certify.baseline={ref} matches no item: none of its 1 entries "
                                 "is the configuration of a point of suite tiny\n")
    code, _, err = certify(capsys, "tiny", f"certify.baseline={tmp_path / 'c'}", f"certify.dir={tmp_path / 'c'}")
    assert code == 2 and "a certification is not its own baseline" in err
    assert not (tmp_path / "c").exists()


def planned(tmp_path, name="tiny", **given):
    s = suites.read(name)
    _, plan = run.plan(s, run.system_of(s, given), str(tmp_path / "cert"))
    return s, plan


def record(plan, windows: dict, failed=()):
    """Each planned point written, and its one repeat: rank 0 timing 10 steps of its batch in
    windows[item] seconds on node1 of an H100 (tests/sweepfiles.py)."""
    for p in plan:
        for point, _ in p.made:
            sweepdir.write_point(point)
            d = point.as_dict()
            write_repeat(d, 0, [windows[p.item.name]], device="NVIDIA H100 80GB HBM3",
                         status="failed" if p.item.name in failed else "ok",
                         error="RuntimeError: boom" if p.item.name in failed else None)


def test_each_point_judged_from_its_records_by_hand(conf, tmp_path):
    """resnet: 10 steps x 4 samples in 0.5 s = 80 samples/s against a reference of 100: 0.8, below
    0.95: FAIL; bert: 40 / 1.0 = 40 samples/s against 50: 0.8, its threshold 0.5: PASS, with its
    note; broken: its repeat failed: FAIL, no figure; at certify.threshold=0.75 resnet passes."""
    s, plan = planned(tmp_path)
    record(plan, {"resnet": 0.5, "bert": 1.0, "broken": 0.5}, failed=("broken",))
    ref = tmp_path / "ref.yaml"
    ref.write_text(yaml.safe_dump({"schema": "dlbench.reference", "version": 1, "system": "x", "entries": [
        {"config": {"model": "resnet50", "batch_size": 4, "device": "H100"}, "metric": "throughput", "value": 100.0},
        {"config": {"model": "bert_base", "nodes": 1}, "metric": "throughput", "value": 50.0}]}))
    b = baselines.resolve(str(ref), s)
    assert judge.matched_before(plan, b) == 2       # broken's batch is 8: no entry is its
    rows = {r["item"]: r for r in judge.rows(plan, b, load(tmp_path / "cert", merge=True), s)}
    resnet, bert, broken = rows["resnet"], rows["bert"], rows["broken"]
    assert (resnet["measured"], resnet["baseline"], resnet["ratio"], resnet["verdict"]) == \
        (pytest.approx(80.0), 100.0, pytest.approx(0.8), "FAIL")
    assert resnet["threshold"] == 0.95 and resnet["baseline_from"] == f"{ref}: entry 1"
    assert resnet["config"]["device"] == "NVIDIA H100 80GB HBM3" and resnet["config"]["batch_size"] == 4
    assert resnet["provenance"] == {"image": None, "digest": None, "runtime": None, "framework": "pytorch",
                                    "framework_version": "9.9", "releases": None,
                                    "device": "NVIDIA H100 80GB HBM3", "driver": None, "cuda": None,
                                    "nccl": None, "nccl_network": None, "hosts": ["node1"],
                                    "image_label": "none"}
    assert (bert["ratio"], bert["threshold"], bert["verdict"], bert["note"]) == (pytest.approx(0.8), 0.5, "PASS", "tiny")
    assert (broken["verdict"], broken["status"], broken["measured"]) == ("FAIL", "failed", None)
    assert broken["why"] == "no figure: the point ended failed"
    again = {r["item"]: r["verdict"] for r in judge.rows(plan, b, load(tmp_path / "cert", merge=True), s, threshold=0.75)}
    assert again == {"resnet": "PASS", "bert": "PASS", "broken": "FAIL"}
    two = baselines.Baselines("reference", "x", b.entries + [dict(b.entries[0], source="again")])
    with pytest.raises(judge.Ambiguous, match=r"^item resnet, point 000-pytorch-resnet50-fp32-1x1-bs4: 2 baseline entries"):
        judge.rows(plan, two, load(tmp_path / "cert", merge=True), s)


def test_the_verdict_leads_the_report_and_the_store_keeps_it(conf, tmp_path, capsys):
    from analysis.__main__ import main as analysis
    s, plan = planned(tmp_path)
    record(plan, {"resnet": 0.5, "bert": 1.0, "broken": 0.5})
    rows = judge.rows(plan, baselines.Baselines("none"), load(tmp_path / "cert", merge=True), s)
    doc = {"schema": paths.CERTIFICATION_SCHEMA, "version": 1, "name": "cert", "suite": "tiny",
           "created_unix": 1_790_000_000.0, "system": {"nodes": 1, "gpus_per_node": 1, "launcher": "local",
                                                       "cluster": "local"},
           "baseline": {"kind": "none", "name": ""}, "verdict": "RECORDED", "exit_code": 0,
           "counts": {"MEASURED": 3}, "health": {"ok": True, "hosts": ["node1"]}, "items": rows}
    records.write_json_atomic(str(tmp_path / "cert" / paths.VERDICT_FILE), doc)
    parts = contents.sections(load(tmp_path / "cert", merge=True))
    assert [p.key for p in parts][:2] == ["certification", "summary"]
    text = parts[0].text
    assert text.startswith("## Certification tiny: RECORDED (exit 0)") and "health gate: ok on node1" in text
    row = next(line for line in text.splitlines() if line.startswith("| resnet "))
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "resnet", "1x1", "throughput", "80 samples/s", "-", "-", "0.95", "MEASURED"]
    assert "[1] tiny" in text     # bert's note
    db = str(tmp_path / "store.sqlite")
    assert analysis(["report", str(tmp_path / "cert"), "--no-plot", "--store", db]) == 0
    assert "added certification cert@1790000000.000 (RECORDED, 3 items)" in capsys.readouterr().out
    assert analysis(["history", "--store", db]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Certifications") and "| 2026-09-21 14:13 | tiny    | RECORDED  | 0/0/3/0 | none" in out
    assert analysis(["history", str(tmp_path)]) == 0    # from the folders, the same
    assert "| tiny    | RECORDED  | 0/0/3/0 |" in capsys.readouterr().out


def test_with_no_baseline_given_the_first_records_and_the_next_is_judged_against_it(conf, tmp_path, monkeypatch):
    """Issue 52: `certify smoke` with no baseline answered `certify.baseline=published matches
    no item`. None given (certify/baselines.py `default`, as prepare asks it): the published
    rows where they match (tiny has none), else the newest earlier certification of the suite
    on this system beside this one's folder or in the store, else none: the first
    certification records the baseline."""
    monkeypatch.setenv("DLBENCH_STORE", str(tmp_path / "store.sqlite"))   # none yet
    s, plan = planned(tmp_path)
    system = run.system_of(s, {})

    def chosen(folder):
        return baselines.default(s, system, lambda b: judge.matched_before(plan, b), str(tmp_path),
                                 str(tmp_path / folder))
    first = chosen("cert")
    assert (first.kind, first.entries) == ("none", [])
    assert first.why == ("no published row matches and no earlier certification of suite tiny on "
                         "this system: this one records its baseline")
    record(plan, {"resnet": 0.5, "bert": 1.0, "broken": 0.5})   # tmp_path/cert, recorded
    doc = {"schema": paths.CERTIFICATION_SCHEMA, "version": 1, "name": "cert", "suite": "tiny",
           "created_unix": 1_790_000_000.0, "system": system, "items": []}
    records.write_json_atomic(str(tmp_path / "cert" / paths.VERDICT_FILE), doc)
    older = tmp_path / "older"   # a newer one of another system, and one of another suite: never chosen
    older.mkdir()
    records.write_json_atomic(str(older / paths.VERDICT_FILE), dict(doc, created_unix=2e9, system={"nodes": 2}))
    (tmp_path / "other").mkdir()
    records.write_json_atomic(str(tmp_path / "other" / paths.VERDICT_FILE), dict(doc, created_unix=2e9, suite="smoke"))
    second = chosen("second")
    assert (second.kind, second.name) == ("folder", str(tmp_path / "cert"))
    assert len(second.entries) == 3 and second.why == "the newest earlier certification of suite tiny on this system"
    assert chosen("cert").kind == "none"    # never its own
