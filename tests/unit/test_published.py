"""Published figures (analysis/published/*.yaml, analysis/published/sources.py) beside constructed
points: the device rule, the match, the report's section and the gate against a source."""
import pytest

import analysis
from analysis.__main__ import main
from analysis.figures import matching
from analysis.published import sources as published
from analysis.report import contents as report
from analysis.sections import published as published_section
from tests.sweepfiles import write_point, write_repeat

A100_40 = "NVIDIA A100-SXM4-40GB"
V100_16 = "Tesla V100-SXM2-16GB"


@pytest.mark.parametrize("ours,theirs,same", [
    ("NVIDIA A100-SXM4-40GB", "A100 40GB", True),                 # the family, 40 GB
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", True),
    ("NVIDIA A100-SXM4-40GB", "A100", True),                      # a row naming only the family
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB", False),         # memory differs
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB", True),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB", False),    # form factor differs
    ("Tesla V100-SXM2-16GB", "Tesla V100 16GB", True),            # the row states no form
    ("Tesla V100-PCIE-16GB", "Tesla V100 16GB", True),
    ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB", False),
    ("Tesla V100S-PCIE-32GB", "Tesla V100-PCIE-32GB", False),     # V100S is its own family
    ("NVIDIA H100 80GB HBM3", "H100 SXM", True),                  # HBM3: the SXM part
    ("NVIDIA H100 PCIe", "H100 SXM", False),
    ("NVIDIA H100 80GB HBM3", "A100 80GB", False),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB", True),    # torch.cuda's name, SXM5
    ("H100 SXM5 80GB", "NVIDIA H100 SXM5 80GB", True),
    ("H100-SXM", "NVIDIA H100 SXM5 80GB", True),
    ("NVIDIA H100 PCIe", "NVIDIA H100 SXM5 80GB", False),         # PCIe is another device
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe 80GB", True),
    ("NVIDIA H100 NVL", "NVIDIA H100 SXM5 80GB", False),
    ("NVIDIA H200", "NVIDIA H200 SXM", True),                     # the driver's name, SXM
    ("NVIDIA H200", "NVIDIA H200 NVL", False),
    ("NVIDIA H200 NVL", "NVIDIA H200 SXM", False),
    ("cpu", "cpu", False),                                        # no family: never a match
    (None, "A100", False),
])
def test_device_rule(ours, theirs, same):
    assert matching.same_device(ours, theirs) is same


def test_device_key():
    assert matching.device_key("NVIDIA A100-SXM4-40GB") == ("A100", "sxm", 40)
    assert matching.device_key("Tesla V100 16GB") == ("V100", None, 16)
    assert matching.device_key("NVIDIA GH200 480GB") == ("GH200", None, 480)
    assert matching.device_key("NVIDIA H100 NVL") == ("H100", "nvl", None)
    assert matching.device_key("NVIDIA_H100_80GB_HBM3") == ("H100", "sxm", 80)  # Lambda's logs
    assert matching.device_key("NVIDIA H200") == ("H200", "sxm", None)
    assert matching.device_key("cpu") == (None, None, None)


def test_every_published_file_loads_and_derives_one_device_rows():
    names = published.names()
    assert {"dlperf_v1.0_v100", "paddle_benchmark_resnet50", "nvidia_dle_resnet50_pytorch"} <= set(names)
    src = published.read_source(published.path_of("dlperf_v1.0_v100"))
    derived = [r for r in src["rows"] if r["derived"]]
    # every row with a speedup (the 19 ResNet-50 rows) implies a 1-device row
    assert len(derived) == 19 and all(r["devices"] == 1 for r in derived)
    oneflow = next(r for r in derived if r["framework"] == "oneflow" and r["precision"] == "fp32")
    assert oneflow["throughput"] == pytest.approx(12411.97 / 31.21)      # 397.69
    assert "12411.97 / 31.21" in oneflow["derived_from"] and oneflow["batch_size"] == 128
    assert all(r["device"] == V100_16 for r in src["rows"])             # the file's default
    assert len(published.rows()) == sum(len(published.read_source(published.path_of(n))["rows"])
                                        for n in names)


@pytest.fixture
def sweep(tmp_path):
    s = str(tmp_path / "sweep")
    # A100 40GB, PyTorch fp32, batch 256, 1 device: 10 x 256 in 2.56 s = 1000 images/s.
    # Paddle's report: NGC PyTorch on NVIDIA A100-SXM4-40GB, fp32, bs 256, 1 GPU: 924.989.
    a100 = write_point(s, "000-pytorch-resnet50-fp32-1x1-bs256", batch_size=256, size="full", repeats=1)
    write_repeat(a100, 0, [2.56], device=A100_40)
    # V100 16GB, PyTorch AMP, batch 256, 1 device: 10 x 256 in 3.2 s = 800 images/s.
    # DLPerf: NGC PyTorch AMP bs 256 on 32 V100-SXM2-16GB, 22551.16 at speedup 28.09: the
    # derived 1-device figure 802.82; NVIDIA's README: V100 16GB AMP, 1 GPU, any batch: 1200.
    v100 = write_point(s, "001-pytorch-resnet50-amp-1x1-bs256", precision="amp", batch_size=256,
                       size="full", repeats=1)
    write_repeat(v100, 0, [3.2], device=V100_16)
    # The same on a tiny model: no published figure is of it. At batch 64 (640 images/s): no
    # row at its batch, so the rows at another batch, marked.
    tiny = write_point(s, "002-pytorch-resnet50-amp-1x1-bs256", precision="amp", batch_size=256,
                       size="tiny", repeats=1)
    write_repeat(tiny, 0, [3.2], device=V100_16)
    other = write_point(s, "003-pytorch-resnet50-fp32-1x1-bs64", batch_size=64, size="full",
                        repeats=1)
    write_repeat(other, 0, [1.0], device=A100_40)
    return s


def test_matches_by_hand(sweep):
    points = analysis.load(sweep).points
    found = published.beside(points, published.rows())
    got = sorted((p.point, r["file"], r["throughput"], r["derived"], round(ratio, 4),
                  r.get("other_batch", False)) for p, r, ratio in found)
    assert got == [
        ("000-pytorch-resnet50-fp32-1x1-bs256", "paddle_benchmark_resnet50", 924.989, False,
         round(1000 / 924.989, 4), False),
        ("001-pytorch-resnet50-amp-1x1-bs256", "dlperf_v1.0_v100", pytest.approx(22551.16 / 28.09),
         True, round(800 / (22551.16 / 28.09), 4), False),
        ("001-pytorch-resnet50-amp-1x1-bs256", "nvidia_dle_resnet50_pytorch", 1200, False,
         round(800 / 1200, 4), False),
        # bs 64: no row at its batch, so the A100 40GB row at bs 256 (640 / 924.989)
        ("003-pytorch-resnet50-fp32-1x1-bs64", "paddle_benchmark_resnet50", 924.989, False,
         round(640 / 924.989, 4), True),
    ]


def test_mode_matches_compile():
    row = {"device": V100_16, "framework": "tensorflow", "model": "resnet50", "precision": "amp",
           "devices": 1, "batch_size": None, "mode": "xla"}
    point = {"status": "ok", "throughput": 1.0, "model_size": "full", "device": V100_16,
             "framework": "tensorflow", "model": "resnet50", "precision": "amp", "devices": 1,
             "batch_size": 224, "compile": False}
    assert not published.matches(point, row)
    assert published.matches(dict(point, compile=True), row)
    assert published.matches(point, dict(row, mode="tf.function"))
    assert published.matches(point, dict(row, mode=None))
    assert not published.matches(dict(point, status="oom"), dict(row, mode=None))


def test_report_section(sweep):
    text = report.render(analysis.load(sweep))
    section = text.split("## Published figures beside ours")[1].split("\n## ")[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("| resnet50")]
    assert len(lines) == 4
    a100 = next(ln for ln in lines if A100_40 in ln and "| 256 " in ln)
    cells = [c.strip() for c in a100.split("|")[1:-1]]
    assert cells[:9] == ["resnet50", "pytorch", "fp32", "256", "1x1", A100_40, "1000.0", "925.0", "1.08"]
    assert cells[9].startswith("paddle_benchmark_resnet50 (2023): NGC PyTorch, bs 256")
    derived = next(ln for ln in lines if "dlperf" in ln)
    assert "802.8 (derived)" in derived and "| 1.00 " in derived and "22551.16 / 28.09" in derived
    assert "| 0.67 " in next(ln for ln in lines if "nvidia_dle" in ln)
    assert "bs not stated" in next(ln for ln in lines if "nvidia_dle" in ln)
    other = next(ln for ln in lines if "| 64 " in ln)
    assert "925.0 (bs 256)" in other and "| 0.69 " in other and "bs 256 (not our batch)" in other


def test_no_section_without_a_match(tmp_path):
    s = str(tmp_path)
    write_repeat(write_point(s, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=1), 0, [1.0])
    assert "Published figures" not in report.render(analysis.load(s))


def test_gate_against_a_published_source(sweep, capsys):
    code = main(["compare", sweep, "--reference", "published:paddle_benchmark_resnet50"])
    out = capsys.readouterr().out
    # the one row this run has: 1000 against 924.989, better: PASS; the others are not run
    assert code == 0 and "1 of 1 within tolerance" in out and "PASS" in out
    assert "on NVIDIA A100-SXM4-40GB" in out and "[1] paddle_benchmark_resnet50" in out
    code = main(["compare", sweep, "--reference", "published:nvidia_dle_resnet50_pytorch"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL" in out and "-33.3%" in out      # 800 against 1200
    code = main(["compare", sweep, "--reference", "published:nvidia_dle_resnet50_pytorch",
                 "--tolerance", "0.4"])
    assert code == 0 and "40%" in capsys.readouterr().out


def test_gate_against_a_published_source_bad_input(sweep, tmp_path, capsys):
    code = main(["compare", sweep, "--reference", "published:nowhere"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: no published source 'nowhere'")
    s = str(tmp_path / "cpu")
    write_repeat(write_point(s, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=1), 0, [1.0])
    code = main(["compare", s, "--reference", "published:dlperf_v1.0_v100"])
    err = capsys.readouterr().err
    assert code == 2 and "no row of published:dlperf_v1.0_v100 matches a point" in err


H100 = "NVIDIA H100 80GB HBM3"   # what torch.cuda.get_device_name says of an H100 SXM5


def h100_sweep(tmp_path, batch, device=H100):
    """One H100 point: PyTorch ResNet-50, AMP, 1 GPU; 10 steps of `batch` in 1.0 s."""
    s = str(tmp_path / "h100")
    point = write_point(s, f"000-pytorch-resnet50-amp-1x1-bs{batch}", precision="amp",
                        batch_size=batch, size="full", repeats=1)
    write_repeat(point, 0, [1.0], device=device)
    return analysis.load(s).points


def test_an_h100_record_finds_its_published_row(tmp_path):
    # Lambda's 1x H100 80GB SXM5, AMP, 1 GPU: 2791 images/s at bs 1280, synthetic data; ours
    # 2560 images/s at bs 256: no row is at bs 256, so Lambda's is set beside it, marked.
    found = published.beside(h100_sweep(tmp_path, 256), published.rows())
    assert [(r["file"], r["throughput"], r["batch_size"], r["other_batch"], round(ratio, 4))
            for _, r, ratio in found] == [("lambda_pytorch", 2791, 1280, True, round(2560 / 2791, 4))]
    row = found[0][1]
    assert row["device"] == "NVIDIA H100 SXM5 80GB" and row["data"] == "synthetic"
    assert row["software"] == "NGC PyTorch 24.03" and row["date"] == "2024-09"
    assert row["url"].startswith("https://github.com/lambdal/deeplearning-benchmark/")
    section = published_section.section(analysis.load(str(tmp_path / "h100")))
    line = next(ln for ln in section.splitlines() if ln.startswith("| resnet50"))
    assert "2791.0 (bs 1280)" in line and "| 0.92 " in line and H100 in line


def test_an_h100_at_the_published_batch_matches_exactly(tmp_path):
    found = published.beside(h100_sweep(tmp_path, 1280), published.rows())
    assert [(r["throughput"], r.get("other_batch", False)) for _, r, _ in found] == [(2791, False)]


@pytest.mark.parametrize("device,batch,figure", [
    ("H100 SXM5 80GB", 256, 2791), ("H100-SXM", 256, 2791),  # one part, however it is written
    ("NVIDIA H100 PCIe", 256, 1976),                          # another device, another row
    ("NVIDIA H200", 256, 3079),                               # Lambda's LambdaBM_ENG04 1x H200
    # at bs 256 an A100 80GB has its row already (NVIDIA's README, any batch): Lambda's at 1280
    ("NVIDIA A100-SXM4-80GB", 1280, 1582), ("NVIDIA A100 80GB PCIe", 1280, 1527)])
def test_each_device_finds_its_own_row(tmp_path, device, batch, figure):
    found = published.beside(h100_sweep(tmp_path, batch, device), published.rows())
    assert [r["throughput"] for _, r, _ in found if r["file"] == "lambda_pytorch"] == [figure]


@pytest.mark.parametrize("name", ["lambda_pytorch", "nvidia_dle_resnet50_a100"])
def test_each_row_of_todays_sources_names_its_source_date_software_batch_and_data(name):
    rows = published.read_source(published.path_of(name))["rows"]
    assert rows and all(r["url"].startswith("https://github.com/") for r in rows)
    for r in rows:
        assert r["date"] and r["software"] and isinstance(r["batch_size"], int), r
        assert r["data"].startswith(("synthetic", "real")), r
    # every row is of a device people use now
    assert {matching.device_key(r["device"]).family for r in rows} <= {"A100", "H100", "H200"}
