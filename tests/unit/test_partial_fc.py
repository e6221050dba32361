"""Partial FC (frameworks/pytorch/models/insightface.py) against an unsharded computation, on 1 and on
2 gloo ranks; and the search for the largest size that trains (launchers/driver/search.py; its settings,
launchers/plan/search.py)."""
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from frameworks.pytorch.models.insightface import PartialFC, shard_rows
from contract.point import Point
from launchers.driver import search
from launchers.plan import points, search as search_settings
from launchers.suite import ROOT

EMB, CLASSES, BATCH, SCALE, MARGIN = 8, 7, 5, 16.0, 0.3   # 7 classes: uneven shards of 4 and 3


def reference_loss(embeddings, weight, labels):
    """The unsharded loss: CosFace logits over every class, plain cross-entropy."""
    cosine = F.normalize(embeddings) @ F.normalize(weight).t()
    cosine = cosine - MARGIN * F.one_hot(labels, weight.shape[0])
    return F.cross_entropy(SCALE * cosine, labels)


def data(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2 * BATCH, 6, generator=g)                 # both ranks' inputs
    labels = torch.randint(0, CLASSES, (2 * BATCH,), generator=g)
    labels[:3] = torch.tensor([0, 4, 6])                        # targets on both shards
    return x, labels


def test_shards_cover_every_class_once():
    assert [shard_rows(7, 2, r) for r in range(2)] == [(0, 4), (4, 3)]
    spans = [shard_rows(10, 4, r) for r in range(4)]
    assert spans == [(0, 3), (3, 3), (6, 2), (8, 2)]
    assert shard_rows(5, 1, 0) == (0, 5)


def test_one_rank_is_a_plain_fc():
    torch.manual_seed(0)
    head = PartialFC(EMB, CLASSES, scale=SCALE, margin=MARGIN)
    emb = torch.randn(BATCH, EMB, requires_grad=True)
    labels = torch.tensor([0, 3, 6, 6, 2])
    loss = head(emb, labels)
    loss.backward()
    weight = head.weight.detach().clone().requires_grad_(True)
    emb2 = emb.detach().clone().requires_grad_(True)
    ref = reference_loss(emb2, weight, labels)
    ref.backward()
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)
    torch.testing.assert_close(head.weight.grad, weight.grad)
    torch.testing.assert_close(emb.grad, emb2.grad)


def _rank(rank, port, out):
    dist.init_process_group("gloo", rank=rank, world_size=2, init_method=f"tcp://127.0.0.1:{port}")
    torch.manual_seed(1)                                       # the same backbone on both ranks
    backbone = torch.nn.Linear(6, EMB)
    model = torch.nn.parallel.DistributedDataParallel(backbone)
    full = torch.randn(CLASSES, EMB, generator=torch.Generator().manual_seed(2))
    head = PartialFC(EMB, CLASSES, rank, 2, SCALE, MARGIN)
    first, rows = shard_rows(CLASSES, 2, rank)
    with torch.no_grad():
        head.weight.copy_(full[first:first + rows])
    x, labels = data()
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    loss = head(model(x[mine]), labels[mine])
    loss.backward()
    out[rank] = {"loss": loss.item(), "weight_grad": head.weight.grad.clone(),
                 "backbone_grad": backbone.weight.grad.clone(), "first": first, "rows": rows}
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_match_the_unsharded_loss_and_gradients():
    out = mp.Manager().dict()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_rank, args=(free_port(), out), nprocs=2, join=True)
    # the same computation on one process, every class and both ranks' batches at once
    torch.manual_seed(1)
    backbone = torch.nn.Linear(6, EMB)
    weight = torch.randn(CLASSES, EMB, generator=torch.Generator().manual_seed(2))
    weight.requires_grad_(True)
    x, labels = data()
    ref = reference_loss(backbone(x), weight, labels)
    ref.backward()
    for rank in range(2):
        r = out[rank]
        assert r["loss"] == pytest.approx(ref.item(), rel=1e-5)   # every rank: the global loss
        torch.testing.assert_close(r["weight_grad"], weight.grad[r["first"]:r["first"] + r["rows"]])
        # after DDP's average the backbone's gradient is the unsharded one, on both ranks
        torch.testing.assert_close(r["backbone_grad"], backbone.weight.grad, rtol=1e-5, atol=1e-6)


# --- the search (launchers/driver/search.py) -----------------------------------------------

def fits_up_to(limit, fail_at=None):
    tried = []

    def attempt(value):
        tried.append(value)
        if value == fail_at:
            return "failed"
        return "ok" if value <= limit else "oom"
    return attempt, tried


def test_search_doubles_then_bisects_to_the_tolerance():
    attempt, tried = fits_up_to(1000)
    r = search.find_largest(attempt, 64, 10**6, 0.05)
    assert tried[:6] == [64, 128, 256, 512, 1024, 768]
    assert r["stopped"] is None and r["largest_ok"] <= 1000 < r["smallest_oom"]
    assert r["smallest_oom"] - r["largest_ok"] <= 0.05 * r["largest_ok"]
    assert r["largest_ok"] > 950


def test_search_goes_down_when_start_does_not_fit_and_stops_at_max():
    attempt, tried = fits_up_to(100)
    r = search.find_largest(attempt, 1000, 10**6, 0.1)
    assert tried[:5] == [1000, 500, 250, 125, 62] and 91 <= r["largest_ok"] <= 100
    attempt, tried = fits_up_to(10**9)
    assert search.find_largest(attempt, 1000, 5000, 0.1) == {
        "largest_ok": 5000, "smallest_oom": None, "stopped": None}
    assert tried == [1000, 2000, 4000, 5000]
    attempt, _ = fits_up_to(0)
    assert search.find_largest(attempt, 4, 64, 0.1)["largest_ok"] is None


def test_search_stops_on_a_try_that_says_nothing_about_memory():
    attempt, tried = fits_up_to(1000, fail_at=256)
    r = search.find_largest(attempt, 64, 10**6, 0.05)
    assert tried == [64, 128, 256] and r["largest_ok"] == 128 and r["stopped"] == "256: failed"


@pytest.mark.parametrize("setting,message", [
    ({"start": 4}, "search needs a key"),
    ({"key": "model.nothing"}, "not an integer setting"),
    ({"key": "model.num_classes", "start": 0}, "search.start must be an integer >= 1"),
    ({"key": "model.num_classes", "start": 64, "max": 8}, "search.max (8) is below"),
    ({"key": "model.num_classes", "tolerance": 2}, "tolerance must be a fraction"),
    ({"key": "model.num_classes", "step": 2}, "unknown search setting(s) step"),
])
def test_bad_search_settings_are_one_line(setting, message):
    point = Point.from_dict({"point": "p", "dir": "/p", "framework": {"name": "pytorch"},
                             "search": setting, "model": {"name": "insightface", "num_classes": 1000},
                             "batch_size": 8})
    with pytest.raises(points.ConfigError) as err:
        search_settings.settings(point)
    assert message in str(err.value)


def test_each_try_is_a_point_of_its_own(tmp_path):
    base = Point.from_dict({
        "point": "000-pytorch-insightface-fp32-1x2-bs8", "dir": str(tmp_path / "points" / "000-x"),
        "framework": {"name": "pytorch"}, "model": {"name": "insightface", "num_classes": 1000},
        "batch_size": 8, "config": {"model": {"num_classes": 1000}},
        "search": {"key": "model.num_classes"}})
    s = search_settings.settings(base)
    assert (s["start"], s["max"], s["tolerance"]) == (1000, 1000 * 2**20, 0.05)
    p = search.try_point(base, s, 4096)
    assert p.name == "000-pytorch-insightface-fp32-1x2-bs8-num_classes=4096"
    assert p.dir == str(tmp_path / "points" / p.name)
    assert p.model.num_classes == p.config.model.num_classes == 4096
    assert p.search.base == base.name and p.search.value == 4096
    assert base.model.num_classes == 1000                  # the base is left alone
    batch = search.try_point(base.replace(search={"key": "batch_size"}), {"key": "batch_size"}, 64)
    assert batch.batch_size == 64 and batch.config.batch_size == 64


# --- OOM on a CPU: the harness's memory_limit_mb ------------------------------------------

CAPPED = """
import json, resource, sys
from frameworks.common import harness
from frameworks.common.session import Session
from frameworks.common.distenv import DistEnv
from tests.runspecs import run_spec, stand_in

class Grab(Session):
    def __init__(self, spec, dist):
        self.size = int(sys.argv[1]) * 2**20
    def step(self):
        return float(len(bytearray(self.size)) > 0)

spec = run_spec(batch_size=1, warmup_steps=1, measure_steps=2, memory_limit_mb=64)
rec = harness.run(stand_in(Grab), spec, DistEnv(0, 1, 0, 1, "h", 1))[0]
print(json.dumps([rec["status"], resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY]))
"""


@pytest.mark.parametrize("mib,status", [(8, "ok"), (256, "oom")])
def test_memory_cap_makes_oom_reachable_and_is_lifted_after(mib, status):
    import json
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", CAPPED, str(mib)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [status, True]


def test_running_out_of_memory_while_building_is_oom():
    from frameworks.common import harness
    from frameworks.common.distenv import DistEnv
    from tests.runspecs import run_spec, stand_in

    def build(spec, dist):
        raise MemoryError("a table too large")
    rec = harness.run(stand_in(build), run_spec(batch_size=1, warmup_steps=0, measure_steps=1),
                      DistEnv(0, 1, 0, 1, "h", 1))[0]
    assert rec["status"] == "oom" and "a table too large" in rec["error"]
