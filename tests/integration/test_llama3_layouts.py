"""Tiny Llama 3 at every layout on this machine's CPU (gloo), through `python -m launch`: FSDP on
2 ranks, tp=2, pp=2 and cp=2 train, and every step's loss equals the single-device loss (same
seed, same global batch; Llama 3 has no dropout). One sweep, its impossible combinations
skipped by exclusion rules, as a user would write it."""
import pytest

from tests.launching import analysis, launch, losses, rank_records

pytestmark = pytest.mark.e2e
LOSS_RTOL = 1e-5   # fp32; the split sums reorder additions (seen: 2e-7 here)
LAYOUTS = {  # point-name suffix -> (ranks, the grid's sizes)
    "1x1-bs2-m2": (1, {}),
    "1x2-bs2-fsdp": (2, {"fsdp": True}),
    "1x2-bs2-tp2-m2": (2, {"tp": 2}),
    "1x2-bs2-pp2-m2": (2, {"pp": 2}),
    "1x2-bs2-cp2-m2": (2, {"cp": 2}),
}
RULES = ('exclude=[{where:"gpus_per_node == 1 and (parallel.fsdp or parallel.tp * parallel.pp * '
         'parallel.cp > 1)"},{where:"gpus_per_node == 2 and not parallel.fsdp and parallel.tp * '
         'parallel.pp * parallel.cp != 2"},{where:"parallel.fsdp and parallel.tp * parallel.pp * '
         'parallel.cp > 1"}]')


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("llama3")
    res = launch("-m", "model=llama3", "preset=smoke", "launcher=local", "repeats=1",
                 "warmup_steps=1", "measure_steps=3", "batch_size=2", "global_batch_size=4",
                 "gpus_per_node=1,2", "parallel.tp=1,2", "parallel.pp=1,2", "parallel.cp=1,2",
                 "parallel.fsdp=false,true", RULES, f"hydra.sweep.dir={root}")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return root


def ranks(root, suffix):
    return rank_records(root, f"*-pytorch-llama3-fp32-{suffix}")


@pytest.mark.parametrize("suffix", list(LAYOUTS))
def test_every_layout_trains_with_the_single_device_loss(sweep, suffix):
    n, sizes = LAYOUTS[suffix]
    recs = ranks(sweep, suffix)
    assert len(recs) == n and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    reference = losses(ranks(sweep, "1x1-bs2-m2")[0])
    for r in recs:
        assert losses(r) == pytest.approx(reference, rel=LOSS_RTOL)
        lay = r["parallel"]["layout"]
        assert {k: lay[k] for k in sizes} == sizes and lay["global_batch_size"] == 4
        assert r["parallel"]["mesh_dims"] == ["pp", "dp", "cp", "tp"]
    # the ranks' shares of the model add up to it; each rank has its own place in the grid
    counts = [r["parallel"]["parameters"] for r in recs]
    assert sum(c["owned"] for c in counts) == pytest.approx(counts[0]["model"])
    places = {tuple(sorted(r["parallel"]["coords"].items())) for r in recs}
    assert len(places) == n
    # the global batch's 4 samples are counted once an iteration, whatever the split
    assert sum(r["steps"][-1]["samples"] for r in recs) == 4


def test_context_parallel_ranks_hold_half_of_each_sequence(sweep):
    recs = ranks(sweep, "1x2-bs2-cp2-m2")
    assert [r["parallel"]["coords"]["cp"] for r in recs] == [0, 1]
    assert [r["steps"][-1]["samples"] for r in recs] == [4, 0]   # cp 0 counts the samples
    assert recs[0]["parallel"]["parameters"]["held"] == recs[0]["parallel"]["parameters"]["model"]


def test_the_report_gives_each_layout_its_tokens_per_second(sweep):
    res = analysis("report", str(sweep), "--no-plot")
    assert res.returncode == 0, res.stderr[-3000:]
    section = res.stdout.split("## llama3: tokens/s, TFLOP/s per device and MFU, by layout")[1]
    rows = [line for line in section.splitlines() if line.startswith("| 0")]
    layouts = {line.split("|")[3].strip() for line in rows}
    assert layouts == {"dp1", "dp2, fsdp", "dp1 x tp2", "dp1 x pp2, 1f1b", "dp1 x cp2"}
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[8].replace(",", "")) > 0 and cells[11] == "n/a"   # tokens/s; a CPU: no peak
    assert "No published Llama 3 figure has this layout on this device" in section


@pytest.mark.slurm
def test_context_parallel_across_nodes_on_the_slurm_test_cluster(slurm_cluster, sweep, tmp_path):
    """tp 2 inside each node, cp 2 across two nodes of the real test cluster: the same loss."""
    res = launch("model=llama3", "preset=smoke", "launcher=slurm", "cluster=localtest", "nodes=2",
                 "gpus_per_node=2", "parallel.tp=2", "parallel.cp=2", "repeats=1",
                 "warmup_steps=1", "measure_steps=3", "batch_size=2", "global_batch_size=4",
                 f"hydra.run.dir={tmp_path}", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    res = launch("status", str(tmp_path), "--wait", "--timeout", "300", "--interval", "1",
                 timeout=330)
    assert "COMPLETED" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]
    recs = ranks(tmp_path, "2x2-bs2-tp2-cp2-m2")
    reference = losses(ranks(sweep, "1x1-bs2-m2")[0])
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
    # ranks 0, 1 (cp 0) on one node, ranks 2, 3 (cp 1) on the other: cp crosses the nodes
    hosts = [r["host"] for r in recs]
    assert hosts[0] == hosts[1] != hosts[2] == hosts[3]
    assert [r["parallel"]["coords"]["cp"] for r in recs] == [0, 0, 1, 1]
    for r in recs:
        assert losses(r) == pytest.approx(reference, rel=LOSS_RTOL)
