"""bench=comm end to end: real gloo sweeps through `python -m launch` on local ranks,
read back with analysis/figures/comm.py and the report's section. Small sizes and few iterations,
to stay fast."""
import pytest

from analysis import load
from analysis.figures.comm import comm_table
from analysis.plots import data as plot_data
from analysis.plots import draw as plot
from analysis.sections.comm import render_comm
from contract import busbw
from tests.launching import analysis as run_analysis, launch

SMALL = ["bench.min_bytes=1024", "bench.max_bytes=16384", "bench.warmup_iters=1", "bench.iters=2",
         "repeats=1", "timeout_s=300", "rendezvous_timeout_s=60"]
SIZES = busbw.sizes(1024, 16384, 2)

pytestmark = pytest.mark.e2e


def sweep(out, *overrides, code=0):
    proc = launch("-m", "bench=comm", *SMALL, *overrides, f"output_root={out}", timeout=600)
    assert proc.returncode == code, proc.stdout + proc.stderr
    return comm_table(load(out))


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    out = tmp_path_factory.mktemp("comm")
    return out, sweep(out, "gpus_per_node=1,2,3")


def test_one_rank_has_times_and_no_bandwidth(good):
    # a collective of one rank moves nothing (contract/busbw.py's moves): no figure anywhere
    out, df = good
    one = df[df.ranks == 1]
    assert set(one.op) == set(busbw.OPS) and (one.status == "ok").all() and (one.time_s > 0).all()
    for column in ("algbw_avg", "algbw_min", "algbw_max", "busbw_avg", "busbw_min", "busbw_max"):
        assert one[column].isna().all(), column
    records = [m for m in load(out).comm.itertuples() if m.point in set(one.point)]
    assert records and all(m.algbw_gbps is None or m.algbw_gbps != m.algbw_gbps for m in records)
    text = render_comm(df)
    assert "1 node(s) x 1 = 1 ranks" in text and "Avg bus bandwidth: none: one rank moves nothing" in text
    assert "n/a (1 rank)" in text


def test_every_op_and_size_measured_and_right(good):
    out, df = good
    df = df[df.ranks > 1]
    assert set(df.ranks) == {2, 3}
    assert (df.status == "ok").all() and (df.backend == "gloo").all()
    for (point, op), rows in df.groupby(["point", "op"]):
        n = rows.ranks.iloc[0]
        want = sorted(busbw.element_count(op, s, 4, n) * 4 for s in SIZES)
        places = {"all_gather": {False, True}, "reduce_scatter": {False, True},
                  "all_to_all": {False}, "all_to_allv": {False}}.get(op, {True})
        assert set(rows.inplace) == places, (point, op)
        for p in places:
            assert sorted(rows[rows.inplace == p].bytes) == want, (point, op, p)
    assert set(df.op) == set(busbw.OPS)
    assert (df.wrong == 0).all()
    assert (df.busbw_avg > 0).all() and (df.busbw_min <= df.busbw_max).all()
    assert (df.algbw_avg > 0).all() and (df.time_s > 0).all()
    # busbw is algbw times the op's factor for the point's rank count
    r = df.iloc[0]
    assert r.busbw_avg == pytest.approx(r.algbw_avg * busbw.bus_factor(r.op, r.ranks))
    text = render_comm(df)
    assert "### all_reduce: 1 node(s) x 3 = 3 ranks" in text and "Avg bus bandwidth" in text
    assert "failed" not in text.lower()
    plots, skipped = plot.render(plot_data.of(load(out), df))
    assert [p.name for p in plots] == ["busbw.png"] and plots[0].png.startswith(b"\x89PNG")
    assert "plot skipped: throughput: no training point has a throughput" in skipped


def test_a_corrupted_result_fails_the_run(tmp_path):
    df = sweep(tmp_path, "gpus_per_node=2", "bench.ops=[all_reduce,all_gather]", "bench.corrupt_rank=1", code=1)
    assert (df.status == "failed").all()
    assert (df.wrong > 0).all()  # every measurement of rank 1 was perturbed and caught
    assert "rank 1: CommCheckFailed:" in df.error.iloc[0] and "wrong elements" in df.error.iloc[0]
    assert "FAILED" in render_comm(df)


def test_min_busbw_gates_the_run(tmp_path):
    df = sweep(tmp_path, "gpus_per_node=2", "bench.ops=[all_reduce]", "bench.min_busbw=1000000", code=1)
    assert (df.status == "failed").all() and (df.wrong == 0).all()
    assert "below min_busbw 1000000 for all_reduce" in df.error.iloc[0]


def test_report_shows_bus_bandwidth_and_plots(good):
    folder, _ = good
    out = run_analysis("report", str(folder))
    assert out.returncode == 0, out.stderr
    assert "Avg bus bandwidth" in out.stdout and "all_reduce" in out.stdout
    assert (folder / "report" / "comm.csv").stat().st_size > 0
    assert (folder / "report" / "busbw.png").stat().st_size > 1000
