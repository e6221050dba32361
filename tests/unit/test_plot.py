"""The report's plots (analysis/plots/draw.py): each drawn for a sweep that has its data, with the
axes the reader needs, and skipped with one line for a sweep that has not; report.html
embeds every one of them; they are drawn in a second process (analysis/plots/process.py),
and here when that process dies."""
import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis import __main__ as cli
from analysis.plots import draw as plot
from analysis.plots import data as plot_data
from analysis.plots import process as plot_process
from tests.sweepfiles import write_point, write_repeat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def sweep(tmp_path):
    """resnet50, fp32 and amp, on 1x1, 1x2 and 2x2, 2 repeats each; rank 1 of 2x2 is slow."""
    s = str(tmp_path / "sweep")
    for num, (prec, nodes, gpn) in enumerate([(p, n, g) for p in ("fp32", "amp")
                                              for n, g in ((1, 1), (1, 2), (2, 2))]):
        pt = write_point(s, f"00{num}-pytorch-resnet50-{prec}-{nodes}x{gpn}-bs8", precision=prec,
                         nodes=nodes, gpus_per_node=gpn, repeats=2)
        for r in range(2):
            scale = (1.0 if prec == "fp32" else 0.5) * (1 + 0.1 * r)
            times = [[0.1 * scale] * 10 for _ in range(nodes * gpn)]
            if nodes * gpn == 4:
                times[1] = [0.15 * scale] * 10   # the straggler
            write_repeat(pt, r, None, step_times=times)
    return s


def comm_rows():
    """A comm table as analysis.figures.comm.comm_table makes it: all_reduce and broadcast on 1x2
    and 2x2, sizes 1 KiB..1 MiB."""
    rows = []
    for nodes in (1, 2):
        for op in ("all_reduce", "broadcast"):
            for k in range(0, 11, 2):
                b = 1024 << k
                rows.append({"point": f"p{nodes}", "framework": "pytorch", "dtype": "float32",
                             "nodes": nodes, "gpus_per_node": 2, "ranks": 2 * nodes, "op": op,
                             "bytes": b, "inplace": True, "busbw_avg": b / 1e6,
                             "busbw_min": b / 2e6, "busbw_max": b / 0.5e6, "status": "ok"})
    return pd.DataFrame(rows)


def test_every_training_plot_for_a_sweep_that_has_the_data(sweep):
    plots, skipped = plot.render(plot_data.of(analysis.load(sweep)))
    assert [p.name for p in plots] == ["throughput_resnet50.png", "scaling_resnet50.png",
                                       "rank_steps_resnet50.png", "amp_resnet50.png"]
    assert all(p.png.startswith(b"\x89PNG") and len(p.png) > 5000 for p in plots)
    assert skipped == ["plot skipped: bus bandwidth: no collective measurements (bench=comm)",
                       "plot skipped: checkpoint: no checkpoint point has a figure (bench=checkpoint)"]


def test_scaling_is_on_log2_axes_with_the_device_counts_as_ticks(sweep):
    name, fig = next(plot.scaling_plots(plot_data.of(analysis.load(sweep))))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert list(ax.get_xticks()) == [1, 2, 4]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "ideal (linear)" and len(labels) == 3   # ideal, fp32, amp
    assert plot.device_ticks([1, 8, 16, 32]) == [1, 2, 4, 8, 16, 32]
    assert plot.device_ticks([1, 3]) == [1, 2, 3]


def test_step_times_per_rank_show_the_straggler(sweep):
    name, fig = next(plot.rank_step_plots(plot_data.of(analysis.load(sweep))))
    ax = fig.axes[0]
    assert "2x2" in ax.get_title() and "straggler ratio 1.50" in ax.get_title()
    medians = [line.get_ydata()[0] for line in ax.lines[4::6]]  # boxplot: 6 lines a box
    assert len(medians) == 4 and max(medians) == medians[1] == pytest.approx(157.5)
    assert medians[0] == pytest.approx(105)   # ms: 100 and 110 in the two repeats


def test_amp_over_fp32_is_the_ratio_of_medians(sweep):
    name, fig = next(plot.amp_plots(plot_data.of(analysis.load(sweep))))
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert heights == pytest.approx([2.0, 2.0, 2.0])   # amp steps take half as long


def test_bus_bandwidth_has_a_panel_per_node_count_on_log_log_axes(sweep):
    name, fig = next(plot.busbw_plots(plot_data.of(analysis.load(sweep), comm_rows())))
    assert name == "busbw.png" and [ax.get_title() for ax in fig.axes] == ["1 node", "2 nodes"]
    assert all(ax.get_xscale() == "log" and ax.get_yscale() == "log" for ax in fig.axes)
    assert all(len(ax.get_lines()) == 2 for ax in fig.axes)   # all_reduce, broadcast


def test_one_ranks_zero_bus_bandwidth_is_skipped_without_a_warning(sweep, monkeypatch):
    """Issue 52: a certification on one device (all_reduce at 1x1: bus bandwidth 0) printed
    matplotlib's 'Data has no positive values' warning on the console."""
    one = comm_rows().query("nodes == 1").assign(gpus_per_node=1, ranks=1, busbw_avg=0.0,
                                                 busbw_min=0.0, busbw_max=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots, skipped = plot.render(plot_data.of(analysis.load(sweep), one), only=["bus bandwidth"])
    assert plots == [] and skipped == ["plot skipped: bus bandwidth: no bus bandwidth above 0 "
                                       "(one rank moves nothing between ranks)"]

    def warns(data):   # any warning a plot draws with is a line of the report's
        warnings.warn("Data has no positive values, and therefore cannot be log-scaled.")
        return "nothing"
        yield
    monkeypatch.setattr(plot, "PLOTS", (("odd", warns),))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plot.render(plot_data.of(analysis.load(sweep)))[1] == [
            "plot skipped: odd: nothing",
            "plot odd: warned: Data has no positive values, and therefore cannot be log-scaled."]


def test_each_plot_is_skipped_with_a_line_without_its_data(tmp_path):
    s = str(tmp_path / "sweep")
    pt = write_point(s, "000-pytorch-resnet50-fp32-1x1-bs8", repeats=1)
    write_repeat(pt, 0, [1.0], status="failed", error="RuntimeError: no")
    plots, skipped = plot.render(plot_data.of(analysis.load(s)))
    assert plots == []
    assert [line.split(":")[0] for line in skipped] == ["plot skipped"] * 6
    assert [line.split(":")[1].strip() for line in skipped] == [
        "throughput", "scaling", "step time per rank", "AMP over FP32", "bus bandwidth", "checkpoint"]


def test_the_page_embeds_every_plot_written(sweep, tmp_path, capsys):
    out = tmp_path / "rep"
    assert cli.main(["report", sweep, "--out", str(out)]) == 0
    pngs = sorted(p.name for p in out.glob("*.png"))
    page = (out / "report.html").read_text()
    assert len(pngs) == 4 and page.count('src="data:image/png;base64,') == 4
    assert all(f"<figcaption>{name}</figcaption>" in page for name in pngs)
    skipped = "plot skipped: bus bandwidth"
    assert skipped in page and skipped in capsys.readouterr().out


def test_many_ranks_show_their_quantiles_instead_of_boxes(tmp_path):
    s = str(tmp_path / "sweep")
    pt = write_point(s, "000-pytorch-resnet50-fp32-9x8-bs8", nodes=9, gpus_per_node=8, repeats=1)
    write_repeat(pt, 0, None, step_times=[[0.3 if r == 5 else 0.1] * 3 for r in range(72)])
    name, fig = next(plot.rank_step_plots(plot_data.of(analysis.load(s))))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["p10..p90", "median",
                                                                  "slowest step"]
    medians = ax.lines[0].get_ydata()
    assert len(medians) == 72
    assert medians[5] == pytest.approx(300) and medians[0] == pytest.approx(100)


def test_the_report_draws_in_a_second_process_and_never_imports_matplotlib(sweep, tmp_path):
    code = ("import sys\nfrom analysis.__main__ import main\n"
            f"rc = main(['report', {sweep!r}, '--out', {str(tmp_path / 'rep')!r}])\n"
            "print('matplotlib imported:', 'matplotlib' in sys.modules, 'rc', rc)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert "matplotlib imported: False rc 0" in out.stdout, out.stderr[-2000:]
    assert len(list((tmp_path / "rep").glob("*.png"))) == 4


def test_plots_are_drawn_here_when_the_drawing_process_dies(sweep):
    plotter = plot_process.Plotter()
    try:
        worker = next(iter(plotter._worker._pool._processes.values()))
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(timeout=30)
        plotter.draw(analysis.load(sweep))
        plots, skipped = plotter.result()
    finally:
        plotter.close()
    assert sorted(p.name for p in plots) == ["amp_resnet50.png", "rank_steps_resnet50.png",
                                             "scaling_resnet50.png", "throughput_resnet50.png"]
    assert skipped == ["plot skipped: bus bandwidth: no collective measurements (bench=comm)",
                       "plot skipped: checkpoint: no checkpoint point has a figure (bench=checkpoint)"]


def test_rank_stats_are_the_same_in_the_records_order_and_any_other():
    """The records' order (each rank's steps together, ranks ascending, as many steps each)
    takes rank_stats' fast path, a sort by rows; shuffled, the same steps take the general
    one: the same figures, fliers included."""
    rng = np.random.default_rng(0)
    rank = np.repeat(np.arange(6), 50)
    steps = pd.DataFrame({"rank": rank, "duration": rng.lognormal(-3, 0.5, len(rank)),
                          "host": pd.Categorical([f"node{r // 2}" for r in rank])})
    ordered = plot_data.rank_stats(steps, boxes=True)
    shuffled = plot_data.rank_stats(steps.iloc[rng.permutation(len(steps))].reset_index(drop=True),
                                    boxes=True)
    pd.testing.assert_frame_equal(ordered.drop(columns="fliers"), shuffled.drop(columns="fliers"))
    for a, b in zip(ordered.fliers, shuffled.fliers):
        assert np.array_equal(np.sort(a), np.sort(b))
    assert list(ordered["rank"]) == list(range(6)) and list(ordered.steps) == [50] * 6
    assert list(ordered.host) == ["node0", "node0", "node1", "node1", "node2", "node2"]


def test_rank_stats_are_matplotlibs_boxplot_stats():
    """Per rank, the box, whiskers and fliers matplotlib's own boxplot_stats gives for the
    same steps: ranks with outliers both sides, one with every step alike, and ones whose
    nearest step beyond a quartile lies past the whisker's reach (matplotlib then puts the
    whisker on the quartile)."""
    from matplotlib.cbook import boxplot_stats
    rng = np.random.default_rng(1)
    per_rank = [np.r_[rng.lognormal(-3, 0.2, 40), 0.5, 0.001], np.full(7, 0.1),
                np.array([0.001, 0.001, 0.001, 0.005]), np.array([0.001, 0.005, 0.005, 0.005]),
                rng.uniform(0.01, 0.02, 13)]
    steps = pd.DataFrame({"rank": np.repeat(np.arange(len(per_rank)), [len(d) for d in per_rank]),
                          "duration": np.concatenate(per_rank),
                          "host": pd.Categorical(["node0"] * sum(len(d) for d in per_rank))})
    got = plot_data.rank_stats(steps, boxes=True)
    for row, durations in zip(got.itertuples(), per_rank):
        want = boxplot_stats(durations * 1e3, whis=plot_data.WHIS)[0]
        for key in ("med", "q1", "q3", "whislo", "whishi"):
            assert getattr(row, key) == pytest.approx(want[key]), (row.rank, key)
        assert np.array_equal(np.sort(row.fliers), np.sort(want["fliers"])), row.rank


def _ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")   # a zombie has ended
    except FileNotFoundError:
        return True


def test_the_drawing_process_ends_when_the_report_is_killed():
    """A report killed outright (SIGKILL, the OOM killer) cannot stop its plots' process:
    that process sees its parent gone and ends by itself, rather than wait for work forever."""
    code = ("import time\nfrom analysis.plots import process\np = process.Plotter()\n"
            "print(*p._worker._pool._processes, flush=True)\ntime.sleep(120)")
    report = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        worker = int(report.stdout.readline())
        assert not _ended(worker)
    finally:
        report.kill()
        report.wait()
    deadline = time.monotonic() + 30
    while not _ended(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _ended(worker), f"the plots' process {worker} outlived the report"


def test_the_plots_draw_the_main_tables_points_only(tmp_path):
    """A sweep of data=synthetic,files: training from files has its own table (analysis/
    input.py), not a place in the main tables, so not in the plots either: the throughput
    plot's bar is synthetic's, never one of the two chosen by chance."""
    s = str(tmp_path / "sweep")
    for num, (source, window) in enumerate((("files", 2.0), ("synthetic", 1.0))):
        pt = write_point(s, f"00{num}-pytorch-resnet50-fp32-1x1-bs8",
                         config={"data": {"source": source}})
        for r in range(3):
            write_repeat(pt, r, [window])
    results = analysis.load(s)
    assert len(results.points) == 2
    drawn = plot_data.of(results).points
    assert list(drawn.point) == ["001-pytorch-resnet50-fp32-1x1-bs8"]
    assert drawn.throughput.iloc[0] == pytest.approx(80)   # 10 steps x 8 samples in 1 s
