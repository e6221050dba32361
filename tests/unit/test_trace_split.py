"""The trace's split (analysis/figures/trace_split.py: HTA's temporal breakdown and
communication-computation overlap) on a Kineto trace written by hand, figures by hand."""
import gzip
import json

import pytest

from analysis.figures import trace_split
from analysis.read import trace_file

# (name, cat, stream, start us, end us). Computation on streams 7 and 9, NCCL on 8:
#   A [0,100) and D [50,120) overlap; idle [120,150); B [150,300), C [300,400);
#   N1 [250,350) hidden under B and C; a copy M [400,420) exposed; idle [420,450);
#   N2 [450,550) exposed. Span 550; union 120 + 270 + 100 = 490, idle 60;
#   compute 120 + 250 = 370; non-compute 490 - 370 = 120: communication 100 (N2), other 20 (M);
#   communication 200 us, 100 of them under compute: overlap 50%.
KERNELS = [("void at::native::vectorized_elementwise_kernel<4>(A)", "kernel", 7, 0, 100),
           ("ampere_bf16_s16816gemm_D", "kernel", 9, 50, 120),
           ("sm90_xmma_gemm_B", "kernel", 7, 150, 300),
           ("void at::native::reduce_kernel<C>", "kernel", 7, 300, 400),
           ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "kernel", 8, 250, 350),
           ("Memcpy DtoH (Device -> Pinned)", "gpu_memcpy", 7, 400, 420),
           ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "kernel", 8, 450, 550)]
NOT_GPU = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": -40, "dur": 700, "args": {}},
           {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": -10,
            "dur": 600, "args": {"External id": 4}},   # a span over the kernels, no work of its own
           {"ph": "f", "cat": "ac2g", "name": "ac2g", "ts": 0, "id": 1}]


def write(path, kernels=KERNELS, extra=NOT_GPU, base=1_700_000_000_000.0):
    events = [{"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": base + a,
               "dur": b - a, "args": {"stream": stream, "device": 0}}
              for name, cat, stream, a, b in kernels]
    events += [{**e, "ts": base + e["ts"]} for e in extra]
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events}, f)
    return str(path)


def test_the_split_of_a_trace_written_by_hand(tmp_path):
    s = trace_split.split(trace_file.gpu_events(write(tmp_path / "trace.json.gz")))
    assert s["span_us"] == pytest.approx(550) and s["kernels"] == 7
    assert s["compute_us"] == pytest.approx(370) and s["idle_us"] == pytest.approx(60)
    assert s["exposed_comm_us"] == pytest.approx(100) and s["exposed_other_us"] == pytest.approx(20)
    assert s["comm_us"] == pytest.approx(200) and s["overlap"] == pytest.approx(0.5)
    f = trace_split.shares(s)   # HTA's three: compute, non-compute (120), idle; they sum to 1
    assert f["compute"] == pytest.approx(370 / 550) and f["idle"] == pytest.approx(60 / 550)
    assert f["exposed_comm"] + f["exposed_other"] == pytest.approx(120 / 550)
    assert sum(f.values()) == pytest.approx(1.0)
    line = trace_split.text(s)
    assert line.startswith("compute 67.3%, communication not hidden 18.2%, other non-compute 3.6%, idle 10.9%")
    assert "50% of communication hidden by compute" in line


def test_kinds_are_htas():
    assert trace_split.kind("ncclDevKernel_Broadcast_RING_LL(x)") == "communication"
    assert trace_split.kind("Memset (Device)") == "other" and trace_split.kind("Memcpy HtoD (Pageable -> Device)") == "other"
    assert trace_split.kind("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm>") == "compute"


def test_a_trace_without_gpu_kernels_and_one_that_cannot_be_read(tmp_path):
    cpu = trace_file.gpu_events(write(tmp_path / "cpu.json", kernels=[]))
    assert trace_split.split(cpu) is None and "no GPU kernels" in trace_split.text(None)
    torn = tmp_path / "torn.json"
    torn.write_text(json.dumps({"traceEvents": [{"ph": "X"}]})[:-9])
    bad_gz = tmp_path / "bad.json.gz"
    bad_gz.write_bytes(gzip.compress(b'{"traceEvents": [1, 2')[:-6])
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "soon"}]}))
    for path, says in ((torn, "not a whole JSON trace"), (bad_gz, "is not a whole JSON trace"),
                       (tmp_path / "none.json", "cannot be read"), (odd, "malformed GPU event")):
        with pytest.raises(trace_file.TraceError) as err:
            trace_file.gpu_events(str(path))
        assert says in str(err.value) and "\n" not in str(err.value)


def test_the_report_gives_each_traces_split_and_a_line_for_one_it_cannot_read(tmp_path):
    import os

    import analysis
    from analysis.report import contents as report
    from contract import paths
    from tests.sweepfiles import write_point, write_repeat
    sweep = str(tmp_path / "sweep")
    made = {}
    for name in ("000-pytorch-bert_base-amp-1x1-bs64", "001-pytorch-resnet50-amp-1x1-bs256"):
        rdir = write_repeat(write_point(sweep, name, repeats=1), 0, [1.0], device="NVIDIA H200")
        folder = os.path.join(rdir, "profile", "rank-00000")
        os.makedirs(folder)
        made[name] = write(os.path.join(folder, paths.TORCH_TRACE))
        path = os.path.join(rdir, paths.rank_record_name(0))
        rec = json.load(open(path))
        rec["profile"] = {"status": "ok", "tool": "torch.profiler", "format": "f", "traced_steps": 4,
                          "path": os.path.relpath(made[name], rdir)}
        json.dump(rec, open(path, "w"))
    with open(made["001-pytorch-resnet50-amp-1x1-bs256"], "wb") as f:   # torn
        f.write(b"\x1f\x8b")
    text = report.text(report.sections(analysis.load(sweep)))
    part = text.split("## Why a step takes its time")[1].split("\n## ")[0]
    assert ("- 000-pytorch-bert_base-amp-1x1-bs64 repeat 0: compute 67.3%, communication not hidden "
            "18.2%, other non-compute 3.6%, idle 10.9% of 0.6 ms of GPU time (7 kernels)") in part
    bad = [x for x in part.splitlines() if x.startswith("- 001-")]
    assert len(bad) == 1 and "is not a whole JSON trace" in bad[0]
    assert "| 000-pytorch-bert_base-amp-1x1-bs64 | NVIDIA H200 | not recorded |" in part
    assert "Traceback" not in text
