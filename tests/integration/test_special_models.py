"""DLPerf's special cases through `python -m launch` on this machine's CPU: the tiny sizes
of Wide & Deep, GPT and InsightFace (partial FC on 2 ranks) train, OOM under a memory cap is
a result, the largest num_classes is found by search, and the report and gate read it all."""
import glob
import json

import pytest
import yaml

import analysis
from analysis.figures import metrics
from tests.launching import analysis as cli, launch

pytestmark = pytest.mark.e2e
SECRET = {"MY_TOKEN": "tok-integration-secret", "AWS_SECRET_ACCESS_KEY": "aws-integration-secret"}




@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("special")
    # Wide & Deep at tiny size, batch 512: a vocabulary that fits, and one whose table and its
    # gradient (2 x 4M x 8 x 4 B = 256 MiB) do not fit in 200 MiB.
    res = launch("-m", "model=wide_deep", "preset=smoke", "repeats=1", "batch_size=512",
                 "model.deep_vocab_size=1000,4000000", "memory_limit_mb=200",
                 f"hydra.sweep.dir={root}/wide_deep", env=SECRET)
    assert res.returncode == 1, res.stderr[-3000:]   # the vocabulary that does not fit: OOM
    # GPT and InsightFace (the classifier sharded over both ranks) on 2 ranks
    res = launch("-m", "model=gpt,insightface", "preset=smoke", "repeats=1", "gpus_per_node=2",
                 f"hydra.sweep.dir={root}/two_ranks")
    assert res.returncode == 0, res.stderr[-3000:]
    # the largest num_classes that trains under a 160 MiB cap, 1 rank, batch 4: from 4096, doubling
    # then bisecting (10240-12288 here: 4096 and 8192 ok, 16384 OOM, two more), 5 tries not 7
    res = launch("model=insightface", "preset=smoke", "repeats=1", "memory_limit_mb=160",
                 "search={key:model.num_classes,start:4096,max:1048576,tolerance:0.25}",
                 f"hydra.run.dir={root}/search")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "search model.num_classes: largest that trains" in res.stdout
    return root


def records(folder):
    return [json.load(open(p)) for p in sorted(glob.glob(f"{folder}/points/*/repeat-*/rank-*.json"))]


def test_wide_deep_latency_memory_and_oom(root):
    m = metrics.metrics(analysis.load(root / "wide_deep")).set_index("deep_vocab_size")
    fits, too_big = m.loc[1000], m.loc[4000000]
    assert fits.status == "ok" and fits.latency_ms > 0 and fits.peak_memory_bytes > 0
    assert fits.memory_kind == "host"
    assert too_big.status == "oom"
    oom = [r for r in records(root / "wide_deep") if r["status"] == "oom"]
    assert oom and "can't allocate memory" in oom[0]["error"]


def test_secrets_in_the_environment_never_reach_a_record(root):
    for path in glob.glob(f"{root}/wide_deep/points/*/repeat-*/*.json"):
        text = open(path).read()
        for name, value in SECRET.items():
            assert name not in text and value not in text, path


def test_gpt_and_partial_fc_train_on_two_ranks(root):
    recs = records(root / "two_ranks")
    assert len(recs) == 4 and all(r["status"] == "ok" and r["world_size"] == 2 for r in recs)
    assert all(s["loss"] is not None for r in recs for s in r["steps"])
    # the partial FC's loss is the global one: the same on both ranks
    face = [r for r in recs if r["spec"]["model"]["name"] == "insightface"]
    assert [s["loss"] for s in face[0]["steps"]] == pytest.approx([s["loss"] for s in face[1]["steps"]])
    m = metrics.metrics(analysis.load(root / "two_ranks")).set_index("model")
    gpt = m.loc["gpt"]
    assert gpt.tokens_per_s == pytest.approx(gpt.throughput * 64)
    assert gpt.tflops_per_device > 0 and gpt.mfu != gpt.mfu or gpt.mfu is None   # a CPU: no peak


def test_search_finds_a_finite_largest_with_oom_tries(root):
    ledger = json.load(open(glob.glob(f"{root}/search/searches/*.json")[0]))
    assert ledger["done"] and ledger["stopped"] is None
    assert 1024 <= ledger["largest_ok"] < ledger["smallest_oom"] < 1048576
    assert ledger["smallest_oom"] - ledger["largest_ok"] <= 0.25 * ledger["largest_ok"]
    outcomes = {t["value"]: t["outcome"] for t in ledger["tries"]}
    assert "oom" in outcomes.values() and outcomes[ledger["largest_ok"]] == "ok"
    for t in ledger["tries"]:   # each try a real run, a point of its own
        run = json.load(open(f"{root}/search/points/{t['point']}/repeat-00/run.json"))
        assert run["status"] == t["outcome"]


def test_report_has_a_section_per_special_case(root):
    out = cli("report", str(root), "--no-plot", "--merge")   # its three sweeps in one report
    assert out.returncode == 0, out.stderr
    for text in ("## Environment", "wide_deep (tiny): latency per iteration and peak memory",
                 "| OOM", "## gpt: throughput and FLOP/s by layout", "tokens/s", "TFLOP/s/dev",
                 "% of peak", "Achieved TFLOP/s per device", "MFU",
                 "Largest size that trains", " OOM, ", "insightface: throughput"):
        assert text in out.stdout, text


def test_gate_passes_on_its_own_reference_and_fails_on_a_better_one(root, tmp_path):
    ref = tmp_path / "ref.yaml"
    out = cli("reference", str(root), "--merge", "--out", str(ref), "--system", "ci-cpu", "--tolerance", "0.05")
    assert out.returncode == 0, out.stderr
    metrics = {e["metric"] for e in yaml.safe_load(ref.read_text())["entries"]}
    assert {"latency_ms", "tokens_per_s", "throughput", "largest_ok"} <= metrics
    out = cli("compare", str(root), "--merge", "--reference", str(ref))
    assert out.returncode == 0, out.stdout + out.stderr
    data = yaml.safe_load(ref.read_text())
    for e in data["entries"]:
        if e["metric"] == "tokens_per_s":
            e["value"] *= 2           # a reference twice as fast: this run is a regression
    ref.write_text(yaml.safe_dump(data))
    out = cli("compare", str(root), "--merge", "--reference", str(ref))
    assert out.returncode == 1 and "FAIL" in out.stdout
