"""DLPerf's Wide & Deep table as published data (analysis/published/dlperf_v1.0_v100_wdl.yaml,
`figure: wide_deep`): read and checked by published.wide_deep_rows, left out of the
throughput readers, and shown in the report's wide_deep section."""
import pandas as pd
import pytest

from analysis.published import sources as published
from analysis.sections import special


def test_dlperfs_table_loads_as_transcribed():
    rows = published.wide_deep_rows()
    assert len(rows) == 18 and {r["file"] for r in rows} == {"dlperf_v1.0_v100_wdl"}
    cell = {(r["framework"], r["deep_vocab_size"]): r for r in rows}
    assert cell["oneflow", 819_200_000]["memory_mb"] == 10745
    assert cell["oneflow", 3_200_000]["latency_ms"] == 22.414
    assert cell["hugectr", 25_600_000]["memory_mb"] == 12745
    oom = sorted((f, v) for (f, v), r in cell.items() if r["status"] == "oom")
    assert oom == [("hugectr", 51_200_000 * 2**k) for k in range(5)]   # from 51.2M, HugeCTR only
    r = cell["oneflow", 3_200_000]
    assert (r["devices"], r["batch_size"], r["batch_per_device"], r["device"]) \
        == (32, 16384, 512, "Tesla V100-SXM2-16GB")


def test_throughput_readers_leave_it_out():
    assert "dlperf_v1.0_v100_wdl" not in published.names()
    assert published.names(figure="wide_deep") == ["dlperf_v1.0_v100_wdl"]
    with pytest.raises(published.PublishedError, match="holds wide_deep figures, not throughputs"):
        published.read_source(published.path_of("dlperf_v1.0_v100_wdl"))


@pytest.mark.parametrize("row,message", [
    ("{framework: oneflow, deep_vocab_size: 3.2e6, latency_ms: 1, memory_mb: 1}", "deep_vocab_size"),
    ("{framework: oneflow, deep_vocab_size: 100, memory_mb: 1}", "latency_ms None"),
    ("{framework: oneflow, deep_vocab_size: 100, status: failed}", "status 'failed'"),
    ("{deep_vocab_size: 100, status: oom}", "has no framework"),
])
def test_a_bad_row_is_one_clear_error(tmp_path, row, message):
    (tmp_path / "bad.yaml").write_text(f"figure: wide_deep\nrows:\n  - {row}\n")
    with pytest.raises(published.PublishedError, match=message):
        published.wide_deep_rows(str(tmp_path))


def test_the_section_sets_the_table_beside_ours():
    # one point of ours: 2 ranks, sharded, 12.5 ms and 1.5 GiB per rank at 3.2M rows
    ours = pd.DataFrame([{"model_size": "full", "deep_vocab_size": 3_200_000, "framework": "pytorch",
                          "embedding": "sharded", "precision": "fp32", "batch_size": 512, "nodes": 1,
                          "gpus_per_node": 2, "status": "ok", "latency_ms": 12.5,
                          "peak_memory_bytes": 1.5 * 2**30, "memory_kind": "device"}])
    text = special.wide_deep_section(ours, published.wide_deep_rows())
    ours_row = next(line for line in text.splitlines() if line.startswith("| pytorch"))
    assert [c.strip() for c in ours_row.strip("|").split("|")] \
        == ["pytorch", "sharded", "fp32", "512", "1x2", "12.50 ms, 1.50 GiB"]
    assert "32 x Tesla V100-SXM2-16GB (4 nodes x 8), batch 16384 (512 per device)" in text
    hugectr = next(line for line in text.splitlines() if line.startswith("| hugectr"))
    assert "21.843 ms, 3217 MB" in hugectr and hugectr.count("OOM") == 5
