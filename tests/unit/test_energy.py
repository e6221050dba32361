"""The timed window's energy (contract/energy.py) against figures computed by hand; NVML's
reader (frameworks/common/nvml_energy.py) where it cannot read, as on this CPU machine; the
figures through analysis.load, the report's tables and the GPU check's note."""
import ctypes.util
from types import SimpleNamespace

import pandas as pd
import pytest

import analysis
from analysis.figures import metrics
from analysis.sections import main_tables
from benchmarks.gpu_check import figures
from contract import energy
from frameworks.common import nvml_energy
from frameworks.common.session import Session
from tests.sweepfiles import write_point, write_repeat


# ---- one rank's window -------------------------------------------------------------------
def test_a_window_gives_joules_and_mean_power():
    # 750,000 mJ in 2.5 s: 750 J at 300 W; 2.5 s is past the 2 s (20 updates of 0.1 s)
    e = energy.rank_window(1_000_000, 1_750_000, 2.5, "0000:3b:00.0")
    assert (e["energy_j"], e["mean_power_w"], e["too_short"], e["reason"]) == (750.0, 300.0, False, None)
    assert (e["start_mj"], e["end_mj"], e["window_s"], e["device"]) == (1_000_000, 1_750_000, 2.5, "0000:3b:00.0")
    assert energy.MIN_WINDOW_S == pytest.approx(2.0)


def test_a_window_under_two_seconds_is_flagged_too_short():
    e = energy.rank_window(0, 450_000, 1.5)             # 450 J in 1.5 s: 300 W, but 15 updates
    assert (e["energy_j"], e["mean_power_w"], e["too_short"]) == (450.0, 300.0, True)


def test_a_counter_that_did_not_move_or_went_back_gives_no_figure():
    still = energy.rank_window(5_000, 5_000, 0.05)
    assert still["energy_j"] is None and still["mean_power_w"] is None and still["too_short"] is True
    assert "did not advance in a 0.050 s window" in still["reason"]
    back = energy.rank_window(5_000, 4_000, 3.0)
    assert back["energy_j"] is None and "went back 1000 mJ" in back["reason"]


# ---- a repeat, a point -------------------------------------------------------------------
def test_a_repeat_sums_its_ranks_energy_over_their_samples():
    r0 = energy.rank_window(0, 750_000, 2.5)             # 750 J, 300 W
    r1 = energy.rank_window(0, 800_000, 2.5)             # 800 J, 320 W
    e = energy.repeat_energy([(r0, 80), (r1, 80)])
    # (750 + 800) J / 160 samples = 9.6875 J a sample; (300 + 320) / 2 = 310 W a device
    assert e == {"energy_j": 1550.0, "energy_per_sample_j": 9.6875, "power_per_device_w": 310.0,
                 "energy_too_short": False, "energy_reason": None}
    short = energy.repeat_energy([(r0, 80), (energy.rank_window(0, 450_000, 1.5), 80)])
    assert short["energy_too_short"] is True and short["energy_per_sample_j"] == pytest.approx(1200 / 160)


def test_one_rank_without_a_figure_leaves_the_repeat_without_one():
    cpu = energy.unread("no NVML device: cpu")
    e = energy.repeat_energy([(cpu, 8), (cpu, 8)])
    assert e["energy_per_sample_j"] is None and e["energy_reason"] == "no NVML device: cpu"
    mixed = energy.repeat_energy([(energy.rank_window(0, 1_000, 3.0), 8), (None, 8)])
    assert mixed["energy_j"] is None and mixed["energy_reason"] == energy.NO_RECORD
    bad = energy.repeat_energy([({"energy_j": "lots", "mean_power_w": 1.0}, 8)])
    assert bad["energy_reason"] == "malformed energy in the record"


def test_a_point_takes_the_medians_of_its_repeats_and_per_token_divides_by_the_sequence():
    reps = [{"energy_per_sample_j": x, "power_per_device_w": w, "energy_too_short": s}
            for x, w, s in ((9.6875, 310.0, False), (9.0, 288.0, True), (10.0, 320.0, False))]
    assert energy.point_energy(reps) == {"energy_per_sample_j": 9.6875, "power_per_device_w": 310.0,
                                         "energy_too_short": True, "energy_reason": None}
    none = energy.point_energy([{"energy_per_sample_j": None, "energy_reason": "no NVML device: cpu"}] * 2)
    assert none["energy_per_sample_j"] is None and none["energy_reason"] == "no NVML device: cpu"
    assert energy.per_token(2.048, 1024) == pytest.approx(0.002)
    assert energy.per_token(None, 1024) is None


# ---- the reader where it cannot read ------------------------------------------------------
class Named(Session):
    def __init__(self, device):
        self.device = device

    def nvml_device(self):
        if isinstance(self.device, Exception):
            raise self.device
        return self.device


def test_a_cpu_rank_and_an_adapter_that_names_no_gpu_say_so():
    meter = nvml_energy.Meter(Named(None))
    meter.begin()
    assert meter.end(3.0) == energy.unread("no NVML device: cpu")
    plain = nvml_energy.Meter(Session())   # the default: the adapter cannot say
    assert "names no GPU to NVML (Session.nvml_device)" in plain.end(3.0)["reason"]
    broken = nvml_energy.Meter(Named(RuntimeError("no properties")))
    assert broken.end(3.0)["reason"] == "this rank's GPU cannot be named: RuntimeError: no properties"


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None,
                    reason="NVML is installed here: the reader would read a real GPU")
def test_without_nvml_the_reason_names_the_library():
    e = nvml_energy.Meter(Named("0000:3b:00.0")).end(3.0)
    assert e["energy_j"] is None and e["device"] == "0000:3b:00.0"
    assert e["reason"].startswith("NVML's library libnvidia-ml.so.1 cannot be loaded")


def test_a_library_without_nvml_s_functions_is_a_reason_not_a_crash():
    libc = ctypes.util.find_library("c")                 # a real library, with no NVML in it
    meter = nvml_energy.Meter(Named("GPU-0a1b"), library=libc)
    meter.begin()
    assert meter.end(3.0)["reason"] == "NVML's library has no nvmlInit_v2 (a driver too old?)"


def test_a_device_is_named_by_its_pci_address():
    # as torch's own NUMA binding writes it from the device's properties: domain:bus:device.function
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0, uuid="5a1e-77")
    assert nvml_energy.nvml_id(props) == "0000:3b:00.0"
    assert nvml_energy.nvml_id(SimpleNamespace(uuid="5a1e-77")) == "GPU-5a1e-77"   # an older torch


# ---- the analysis, the report, the GPU check -----------------------------------------------
ONE, LM, CPU = "000-pytorch-resnet50-fp32-1x2-bs8", "001-pytorch-llama3-fp32-1x1-bs8", "002-pytorch-resnet50-fp32-1x1-bs8"


def _energy(windows_j, window_s):
    return lambda rank: {"energy": energy.rank_window(0, int(windows_j[rank] * 1000), window_s, f"gpu{rank}")}


@pytest.fixture
def sweep(tmp_path):
    s = str(tmp_path)
    one = write_point(s, ONE, gpus_per_node=2, repeats=3)
    # 10 steps x 8 samples a rank, 2.5 s: 160 samples a repeat
    for r, js in enumerate([(750, 800), (700, 740), (800, 800)]):
        write_repeat(one, r, [2.5, 2.5], device="H100", fields=_energy(js, 2.5))
    lm = write_point(s, LM, model="llama3", settings={"seq_len": 64}, repeats=1)
    write_repeat(lm, 0, [1.6], device="H100", fields=_energy((1280,), 1.6))   # 1.6 s: too short
    cpu = write_point(s, CPU, repeats=1)
    write_repeat(cpu, 0, [1.0], fields=lambda rank: {"energy": energy.unread("no NVML device: cpu")})
    return s


def test_points_runs_and_metrics_carry_the_figures(sweep):
    res = analysis.load(sweep)
    runs = res.runs[res.runs.point == ONE].set_index("repeat")
    # 1550 / 160, 1440 / 160, 1600 / 160 J a sample; 310, 288, 320 W a device
    assert list(runs.energy_per_sample_j) == [9.6875, 9.0, 10.0]
    assert list(runs.power_per_device_w) == [310.0, 288.0, 320.0]
    p = res.points.set_index("point")
    assert (p.loc[ONE].energy_per_sample_j, p.loc[ONE].power_per_device_w) == (9.6875, 310.0)
    assert not p.loc[ONE].energy_too_short and p.loc[ONE].energy_per_token_j is None
    # 1280 J over 10 x 8 sequences of 64 tokens: 16 J a sequence, 0.25 J a token; 800 W
    assert (p.loc[LM].energy_per_sample_j, p.loc[LM].energy_per_token_j) == (16.0, 0.25)
    assert p.loc[LM].energy_too_short and p.loc[LM].power_per_device_w == 800.0
    assert pd.isna(p.loc[CPU].energy_per_sample_j) and p.loc[CPU].energy_reason == "no NVML device: cpu"
    m = metrics.metrics(res).set_index("point")
    assert m.loc[LM].energy_per_token_j == 0.25 and m.loc[CPU].energy_reason == "no NVML device: cpu"
    # the gpu-check's note
    assert figures.energy_note(m.loc[ONE]) == "9.69 J/sample, 310 W per GPU"
    assert figures.energy_note(m.loc[LM]) == \
        "0.25 J/token, 800 W per GPU (window under 2 s: too short for NVML's counter)"
    assert figures.energy_note(m.loc[CPU]) == "energy n/a: no NVML device: cpu"


def test_the_report_tables_show_energy_and_power_or_why_not(sweep):
    pts = analysis.load(sweep).points
    resnet = "\n\n".join(main_tables.energy_sections(pts[pts.model == "resnet50"]))
    assert "### Energy per sample (J" in resnet and "| 9.69" in resnet and "| 310" in resnet
    assert "n/a: no NVML device: cpu" in resnet and "S =" not in resnet
    llama = "\n\n".join(main_tables.energy_sections(pts[pts.model == "llama3"]))
    assert "### Energy per token (J" in llama and "| 0.25 S" in llama and "| 800 S" in llama
    assert "S = a timed window shorter than 2 s" in llama
    cpu_only = main_tables.energy_sections(pts[pts.point == CPU])
    assert cpu_only == ["Energy per sample: n/a: no NVML device: cpu"]
    # records older than the field: nothing to say (the old sweep's golden report is unchanged)
    old = pts[pts.point == CPU].assign(energy_reason=energy.NO_RECORD)
    assert main_tables.energy_sections(old) == []


def test_report_html_s_one_table_has_the_energy_and_power_columns(sweep):
    from analysis import tables
    pts = analysis.load(sweep).points
    (llama,) = tables.one_table(pts[pts.model == "llama3"])
    assert (llama["cells"]["energy"], llama["cells"]["power_per_device_w"]) == ("0.25 /token (short)", "800 (short)")
    rows = tables.one_table(pts[pts.model == "resnet50"])
    assert [(r["cells"]["energy"], r["cells"]["power_per_device_w"]) for r in rows] == \
        [("n/a", "n/a"), ("9.69", "310")]    # the CPU point (1x1), the two GPUs (1x2)
