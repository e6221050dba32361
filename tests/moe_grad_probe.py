"""One rank of a tiny mixture of experts (DeepSeek-V3, or another with a third argument naming it:
`qwen3_moe`, `gpt_oss`) at a layout, for tests/integration/test_moe_layouts.py: a probe's
`main`, run in the ranks of tests/rank_probes.py. The rank builds its session
(frameworks/pytorch/lm_session.py), runs one forward and backward of the global batch (the
gradients synchronised as training syncs them), and compares every gradient it holds with its
part of the single-device model's gradient, computed here too from the same seed and batch: the
routed experts' (expert parallelism, their FSDP or replication over edp, their split over tp),
the router's, the attention's. Gives one JSON line a case: the largest difference of a gradient,
relative to that gradient's largest value, and the parameter it is of. Several cases run in one
set of processes (tests/rank_probes.py), each case's arguments a list:

    rank_probes.run("tests/moe_grad_probe.py", [{"ranks": 2, "args": [{"ep": 2}, GLOBAL, MODEL]}])
"""
import functools
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from contract import parallel  # noqa: E402
from frameworks.common.distenv import DistEnv  # noqa: E402
from frameworks.pytorch import lm_session  # noqa: E402
from frameworks.pytorch.layouts import parallelize  # noqa: E402
from tests.frameworks_env import model_cfg  # noqa: E402
from tests.runspecs import run_spec  # noqa: E402


@functools.cache   # once a process for every layout of a model: it depends on none
def reference(name, global_batch, seed) -> dict:
    """name -> the single-device model's gradient of the global batch's mean loss."""
    cfg, family = model_cfg(name, "tiny"), importlib.import_module(f"frameworks.pytorch.models.{name}")
    model = family.Model(**cfg)
    parallelize.init_parameters(model, family, seed)
    rows = family.synthetic_tokens(cfg, global_batch, seed)
    family.loss_fn(model(rows[:, :-1]), rows[:, 1:]).backward()
    return {n: p.grad for n, p in model.named_parameters()}


def main(settings: dict, global_batch: int, name: str = "deepseek_v3"):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    lay, bad = parallel.resolve(settings, world, 1, None, global_batch)
    assert not bad, bad
    cfg, family = model_cfg(name, "tiny"), importlib.import_module(f"frameworks.pytorch.models.{name}")
    spec = run_spec(model=cfg, precision="fp32", amp_dtype=None, compile=False, seed=0,
                    parallel=lay.as_dict(), device="cpu", rendezvous_timeout_s=60)
    dist = DistEnv(rank, world, rank, world, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    session = lm_session.session_of(family)(spec, dist)
    with session._context():
        session._accumulate()
    full = reference(name, global_batch, 0)
    worst, which, compared = 0.0, None, 0
    for module in map(parallelize.unwrap, session.modules):
        for param, p in module.named_parameters():
            grad = parallelize.local(p.grad)
            owner = module.get_submodule(param.rpartition(".")[0])
            want = full[param][list(owner.ids)] if hasattr(owner, "ids") else full[param]
            want = parallelize.local_part(p.grad, want)   # by the gradient's own placements
            relative = (grad - want).abs().max().item() / max(want.abs().max().item(), 1e-30)
            if relative >= worst:
                worst, which = relative, param
            compared += 1
    return {"rank": rank, "relative": worst, "parameter": which, "compared": compared,
            "owned": session.counts["owned"], "model": session.counts["model"]}, session.close

