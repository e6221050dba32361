"""report.html in a real headless browser (Debian's chromium): the tables' text, the
failure reasons and the plots are in the rendered page, and its screenshot is not blank."""
import shutil
import subprocess
import sys

import pytest

from launchers.points import ROOT
from tests.sweepfiles import write_point, write_repeat

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (`make browser-deps`)")
# As root, headless, with nothing reaching out to the network (docs: the machine has none).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def browser(tmp_path, *args):
    out = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_the_page_renders_every_table_failure_and_plot(tmp_path):
    sweep = tmp_path / "sweep"
    one = write_point(sweep, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=2)
    two = write_point(sweep, "001-pytorch-resnet50-fp32-1x2-bs8", gpus_per_node=2, repeats=2)
    for k in range(2):
        write_repeat(one, k, [1.0])            # 80 samples/s
        write_repeat(two, k, [1.0, 1.0])       # 160 samples/s
    bad = write_point(sweep, "002-pytorch-resnet50-fp32-1x4-bs8", gpus_per_node=4, repeats=1)
    write_repeat(bad, 0, [1.0] * 4, status="failed", error="RuntimeError: tensor <lost> at step 3")
    res = subprocess.run([sys.executable, "-m", "analysis", "report", str(sweep),
                          "--html", str(tmp_path / "page.html")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    html = (tmp_path / "page.html").read_text()
    assert "http://" not in html and "https://" not in html  # nothing from the network
    dom = browser(tmp_path, "--dump-dom", f"file://{tmp_path / 'page.html'}")
    for text in ("Throughput (samples/s, median of ok repeats)", "Speedup over 1 device",
                 "80.0", "160.0", "2.00", "FAILED", "RuntimeError: tensor &lt;lost&gt; at step 3",
                 "Failed, cut short or missing", 'src="data:image/png;base64,',
                 "throughput_resnet50.png", "scaling_resnet50.png", "rank_steps_resnet50.png",
                 "plot skipped: AMP over FP32: no configuration ran both fp32 and amp"):
        assert text in dom, text
    shot = tmp_path / "page.png"
    browser(tmp_path, "--window-size=1200,1600", f"--screenshot={shot}", f"file://{tmp_path / 'page.html'}")
    from PIL import Image
    image = Image.open(shot).convert("L")
    dark = sum(image.histogram()[:128])
    assert image.size == (1200, 1600) and dark > 5000, dark  # text and plot lines, not a blank page
