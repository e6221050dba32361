"""certify.baseline= of each kind (certify/baselines.py) as the regression gate's entries, with
figures computed by hand, and the gate's one matcher finding a point's: a sweep folder, its
archive, a reference file, the results store (a certification, a sweep), the published rows,
none; and the refusals, one line each."""
import json
import os

import pytest
import yaml

from analysis.gate import compare
from analysis.gate.reference import figures
from analysis.read import archive
from analysis.read.load import load
from certify import baselines
from certify import suite as suites
from contract import paths, records
from tests.sweepfiles import write_point, write_repeat

DEVICE = "NVIDIA H100 80GB HBM3"
# two ranks' checkpoint records (tests/unit/test_checkpoint.py's): 4e9 bytes, slowest 4 s: 1 GB/s
CKPT = [{"bytes": 3e9, "blocked_s": 0.5, "durable_s": 2.0, "load_s": 1.0, "bare_bytes": 3e9,
         "bare_write_s": 0.5, "bare_read_s": 0.25},
        {"bytes": 1e9, "blocked_s": 0.25, "durable_s": 4.0, "load_s": 2.0, "bare_bytes": 1e9,
         "bare_write_s": 1.0, "bare_read_s": 0.5}]


def comm(op, nbytes, seconds):
    return {"op": op, "bytes": nbytes, "count": nbytes // 4, "dtype": "float32", "inplace": True,
            "iters": 5, "time_s": seconds, "algbw_gbps": nbytes / seconds / 1e9,
            "busbw_gbps": nbytes / seconds / 1e9, "wrong": 0}


def with_bench(pt, bench):
    pt["bench"] = bench
    records.write_json_atomic(os.path.join(pt["dir"], paths.POINT_FILE), pt)
    return pt


def a_sweep(root, name="A", scale=1.0) -> str:
    """Three points on 1x2 of DEVICE: resnet50 training (2 ranks x 10 steps x 8 samples in 1 s
    / scale: 160 x scale samples/s), all_reduce of 1 GB in 0.5 s and 2 GB in 0.5 s / scale (2
    ranks: busbw = algbw: 2 and 4 GB/s, their mean 3 x scale), a checkpoint (1 GB/s x scale)."""
    folder = os.path.join(str(root), name)
    kw = dict(nodes=1, gpus_per_node=2, repeats=1)
    train = write_point(folder, "000-pytorch-resnet50-fp32-1x2-bs8", **kw)
    write_repeat(train, 0, [1.0 / scale] * 2, device=DEVICE)
    c = with_bench(write_point(folder, "001-comm-pytorch-float32-1x2", **kw), "comm")
    write_repeat(c, 0, [1.0, 1.0], steps=1, device=DEVICE, fields=lambda r: {
        "comm": [comm("all_reduce", 10**9, 0.5 / scale), comm("all_reduce", 2 * 10**9, 0.5 / scale)]})
    k = with_bench(write_point(folder, "002-checkpoint-pytorch-gpt-fp32-1x2-bs8", model="gpt",
                               config={"checkpoint": {"mode": "sync"}}, **kw), "checkpoint")
    write_repeat(k, 0, [1.0, 1.0], steps=1, device=DEVICE, fields=lambda r: {
        "checkpoint": {**CKPT[r], "durable_s": CKPT[r]["durable_s"] / scale}})
    return folder


def suite_of(*items) -> suites.Suite:
    return suites.parse({"items": [dict({"published": {"none": "x"}, "overrides": []}, **i)
                                   for i in items]}, "t")


SUITE = suite_of({"name": "r", "metric": "throughput"}, {"name": "c", "metric": "busbw_gbps", "op": "all_reduce"},
                 {"name": "k", "metric": "checkpoint_gbps"})


def test_the_gates_figures_of_a_collective_and_a_checkpoint_by_hand(tmp_path):
    rows = {r["point"][:3]: r for r in figures(load(a_sweep(tmp_path)))}
    assert rows["000"]["throughput"] == pytest.approx(160.0)           # 2 x 10 x 8 / 1 s
    assert rows["001"]["bench"] == "comm" and rows["001"]["op"] == "all_reduce"
    assert rows["001"]["busbw_gbps"] == pytest.approx(3.0)             # (2 + 4) / 2
    assert rows["001"]["throughput"] is None and rows["002"]["throughput"] is None   # no training figure
    assert rows["002"]["checkpoint_gbps"] == pytest.approx(1.0)        # 4e9 bytes / 4 s


def test_a_sweep_folder_and_its_archive_give_an_entry_per_point_and_metric(tmp_path):
    folder = a_sweep(tmp_path)
    b = baselines.resolve(folder, SUITE)
    assert b.kind == "folder" and b.name == folder
    got = {e["metric"]: e for e in b.entries}
    assert set(got) == {"throughput", "busbw_gbps", "checkpoint_gbps"} and len(b.entries) == 3
    assert got["throughput"]["value"] == pytest.approx(160.0)
    assert got["busbw_gbps"]["value"] == pytest.approx(3.0)
    assert got["busbw_gbps"]["config"] == {"framework": "pytorch", "nodes": 1, "gpus_per_node": 2,
                                           "device": DEVICE, "bench": "comm", "op": "all_reduce"}
    assert got["checkpoint_gbps"]["config"]["bench"] == "checkpoint"
    assert got["throughput"]["config"]["device"] == DEVICE and "bench" not in got["throughput"]["config"]
    assert got["throughput"]["source"] == f"{folder}: 000-pytorch-resnet50-fp32-1x2-bs8"
    out, _ = archive.write(folder)
    a = baselines.resolve(out, SUITE)
    assert a.kind == "archive" and [(e["metric"], e["value"]) for e in a.entries] == \
        [(e["metric"], e["value"]) for e in b.entries]


def test_the_one_matcher_finds_a_points_entry_and_no_other(tmp_path):
    """A later run of the same configuration matches each entry of its metric, and of its
    bench only; another device matches none; before the run (no device known) it matches."""
    entries = baselines.resolve(a_sweep(tmp_path), SUITE).entries
    later = {r["point"][:3]: r for r in figures(load(a_sweep(tmp_path, "B", scale=0.5)))}
    r, c, k = SUITE.items
    assert [e["value"] for e in baselines.find(entries, later["000"], r)] == [pytest.approx(160.0)]
    assert [e["metric"] for e in baselines.find(entries, later["001"], c)] == ["busbw_gbps"]
    assert [e["metric"] for e in baselines.find(entries, later["002"], k)] == ["checkpoint_gbps"]
    assert baselines.find(entries, later["001"], r) == []        # a collective is no training point
    other = dict(later["000"], device="NVIDIA A100-SXM4-40GB")
    assert baselines.find(entries, other, r) == []
    assert len(baselines.find(entries, dict(other, device=None), r, planned=True)) == 1
    assert baselines.find(entries, dict(later["000"], batch_size=16), r) == []
    # the regression gate's own matcher, which `analysis compare` uses: the same answers
    by_metric = {e["metric"]: e["config"] for e in entries}
    assert compare.matches(later["001"], by_metric["busbw_gbps"])
    assert not compare.matches(later["001"], by_metric["throughput"])
    assert not compare.matches(later["000"], by_metric["busbw_gbps"])


def test_a_reference_file_of_the_gates_format(tmp_path):
    ref = tmp_path / "ref.yaml"
    ref.write_text(yaml.safe_dump({"schema": "dlbench.reference", "version": 1, "system": "h100",
                                   "entries": [{"config": {"bench": "comm", "op": "all_reduce", "nodes": 1},
                                                "metric": "busbw_gbps", "value": 2.5},
                                               {"config": {"model": "resnet50"}, "metric": "latency_ms",
                                                "value": 40.0}]}))
    b = baselines.resolve(str(ref), SUITE)
    assert b.kind == "reference" and [e["metric"] for e in b.entries] == ["busbw_gbps", "latency_ms"]
    assert b.entries[0]["unit"] == "GB/s" and b.entries[1]["lower_is_better"] is True
    rows = {r["point"][:3]: r for r in figures(load(a_sweep(tmp_path)))}
    assert [e["value"] for e in baselines.find(b.entries, rows["001"], SUITE.items[1])] == [2.5]


def test_a_stored_certification_and_a_stored_sweep(tmp_path, capsys):
    from analysis.__main__ import main
    db = str(tmp_path / "store.sqlite")
    cert = tmp_path / "certify-x"
    a_sweep(cert, "r")
    records.write_json_atomic(str(cert / paths.VERDICT_FILE), {
        "schema": paths.CERTIFICATION_SCHEMA, "version": 1, "name": "certify-x", "suite": "t",
        "created_unix": 1_790_000_000.0, "verdict": "RECORDED", "exit_code": 0, "counts": {"MEASURED": 1},
        "items": [{"item": "c", "point": "001-comm-pytorch-float32-1x2", "metric": "busbw_gbps",
                   "unit": "GB/s", "lower_is_better": False, "status": "ok", "measured": 3.0,
                   "config": {"bench": "comm", "op": "all_reduce", "nodes": 1}}]})
    assert main(["store", "add", str(cert), "--store", db]) == 0
    assert "added certification certify-x@1790000000.000 (RECORDED, 1 items)" in capsys.readouterr().out
    b = baselines.resolve("store:certify-x", SUITE, db)
    assert b.kind == "store" and [(e["metric"], e["value"]) for e in b.entries] == [("busbw_gbps", 3.0)]
    assert b.entries[0]["source"] == "stored certification certify-x@1790000000.000: 001-comm-pytorch-float32-1x2"
    s = baselines.resolve("store:r", SUITE, db)   # the certification's item sweep, as a stored sweep
    assert [(e["metric"], round(e["value"], 3)) for e in s.entries] == [("throughput", 160.0)]
    with pytest.raises(baselines.BaselineError, match=r"^certify.baseline=store:nosuch: no certification or sweep"):
        baselines.resolve("store:nosuch", SUITE, db)


def test_published_rows_as_the_suite_names_them():
    s = suite_of({"name": "r", "metric": "throughput", "published": {
                      "source": "lambda_pytorch", "row": {"device": "NVIDIA H100 SXM5 80GB", "model": "resnet50",
                                                          "precision": "amp", "devices": 8}}},
                 {"name": "l", "metric": "mfu", "published": {
                      "source": "dgxc_llama3.1_h100", "row": {"case": "llama3.1-8b-bf16-8gpu", "impl": "nemo"},
                      "figure": "mfu_percent"}},
                 {"name": "n", "metric": "throughput"})
    b = baselines.resolve(None, s)
    assert b.kind == "published" and [e["item"] for e in b.entries] == ["r", "l"]
    r, l = b.entries
    assert (r["value"], r["config"]["batch_size"], r["config"]["devices"]) == (22059.0, 1280, 8)
    assert l["value"] == pytest.approx(0.5999) and l["config"] == {   # 59.99 % of peak
        "model": "llama3", "size": "8b", "precision": "amp", "devices": 8, "device": DEVICE,
        "amp_dtype": "bf16", "model.seq_len": 8192}
    assert "tp1 pp1 cp2" in l["note"] and "global batch 128" in l["note"]
    assert baselines.resolve("none", s).entries == []


@pytest.mark.parametrize("published, line", [
    ({"source": "lambda_pytorch", "row": {"model": "resnet50", "devices": 8}},
     r"^item r: published row \{'model': 'resnet50', 'devices': 8\} of lambda_pytorch is \d+ rows, not one$"),
    ({"source": "nosuch", "row": {"a": 1}}, r"^item r: no published source 'nosuch' \(there are: "),
    ({"source": "dgxc_llama3.1_h100", "row": {"case": "llama3.1-8b-bf16-8gpu"}, "figure": "mfu_percent"},
     r"^item r: figure mfu_percent is mfu; the item is judged on throughput$"),
    ({"source": "dgxc_llama3.1_h100", "row": {"case": "llama3.1-8b-bf16-8gpu"}, "figure": "speed"},
     r"^item r: figure 'speed': one of the case's tokens_per_s_total, mfu_percent$"),
])
def test_a_published_row_that_is_not_one_or_not_the_items_metric_is_refused(published, line):
    with pytest.raises(baselines.BaselineError) as e:
        baselines.resolve("published", suite_of({"name": "r", "metric": "throughput", "published": published}))
    assert len(e.value.lines) == 1
    assert __import__("re").match(line, e.value.lines[0]), e.value.lines[0]


def test_what_is_no_baseline_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    for given, line in ((str(tmp_path / "empty"), f"certify.baseline={tmp_path / 'empty'}: no sweep points under "),
                        (str(tmp_path / "notes.txt"), f"certify.baseline={tmp_path / 'notes.txt'}: not published, none, "),
                        ("nowhere", "certify.baseline=nowhere: not published, none, a folder, an archive")):
        with pytest.raises(baselines.BaselineError) as e:
            baselines.resolve(given, SUITE)
        assert len(e.value.lines) == 1 and e.value.lines[0].startswith(line), e.value.lines
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "dlbench.reference", "version": 1, "entries": [{"metric": "busbw"}]}))
    with pytest.raises(baselines.BaselineError, match=r"entry 1: metric 'busbw' is not one of"):
        baselines.resolve(str(bad), SUITE)
