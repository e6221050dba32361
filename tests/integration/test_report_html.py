"""report.html in a real headless browser (Debian's chromium): the first screen a reader
sees holds the summary (with the failure and its reason) and the plots, then one table per
model, then the folded details; its screenshot is checked for both. (The page's structure
in detail: tests/unit/test_report_page.py.)"""
import shutil
import subprocess
import sys

import pytest

from launchers.suite import ROOT
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


def test_the_first_screen_shows_the_summary_and_the_plots(tmp_path):
    sweep = tmp_path / "sweep"
    for num, (prec, gpn) in enumerate([("fp32", 1), ("fp32", 2), ("amp", 1), ("amp", 2)]):
        pt = write_point(sweep, f"00{num}-pytorch-resnet50-{prec}-1x{gpn}-bs8", precision=prec,
                         gpus_per_node=gpn, repeats=2)
        for k in range(2):
            write_repeat(pt, k, [0.5 if prec == "amp" else 1.0] * gpn)   # 80 or 160 per rank
    bad = write_point(sweep, "004-pytorch-resnet50-fp32-1x4-bs8", gpus_per_node=4, repeats=1)
    write_repeat(bad, 0, [1.0] * 4, status="failed", error="RuntimeError: tensor <lost> at step 3")
    res = subprocess.run([sys.executable, "-m", "analysis", "report", str(sweep),
                          "--html", str(tmp_path / "page.html")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    html = (tmp_path / "page.html").read_text()
    assert "http://" not in html and "https://" not in html  # nothing from the network
    dom = browser(tmp_path, "--dump-dom", f"file://{tmp_path / 'page.html'}")
    first = dom.split('<h2 id="model-resnet50">')[0]
    for text in ("4 of 5 ended ok", "1 FAILED", "004-pytorch-resnet50-fp32-1x4-bs8",
                 "RuntimeError: tensor &lt;lost&gt; at step 3", "pytorch 9.9",
                 'alt="throughput_resnet50.png"', 'alt="scaling_resnet50.png"',
                 'alt="amp_resnet50.png"', 'src="data:image/png;base64,'):
        assert text in first, text
    table = dom.split('<h2 id="model-resnet50">')[1].split("</table>")[0]
    for text in ("samples/s", "95% interval", "speedup", "efficiency", "TFLOP/s per device",
                 "MFU", "peak memory per rank (GiB)", "flags", "160.0", "2.00", "100%",
                 'title="fewer than 3 ok repeats">N</abbr>'):
        assert text in table, text
    folds = dom.split("<details>")[1:]
    assert any("Step time per rank" in f and "Straggler ratio" in f for f in folds)
    assert any("Failed, cut short or missing" in f for f in folds)
    # the first screen, as a reader opening the page sees it: the summary's box at the top,
    # and the plots: pixels of pytorch's colour (analysis/plots/style.py) in bars and lines
    shot = tmp_path / "first-screen.png"
    browser(tmp_path, "--window-size=1280,800", "--hide-scrollbars", f"--screenshot={shot}",
            f"file://{tmp_path / 'page.html'}")
    import numpy as np
    from PIL import Image
    from analysis.plots import style as plot_style
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 800)
    pixels = np.asarray(image).astype(int)
    colour = [int(plot_style.framework_colour("pytorch")[i:i + 2], 16) for i in (1, 3, 5)]
    near = (np.abs(pixels - colour) < 24).all(axis=2).sum()
    assert near > 20000, near     # three plots' bars and lines, not a page of tables
    box = (pixels[40:140] == [244, 246, 250]).all(axis=2).mean()
    assert box > 0.5, box         # the summary's box (.summary's background) at the top
