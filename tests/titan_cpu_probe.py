"""One rank of torchtitan's Llama 3 built by frameworks/pytorch/titan/session.py's TitanSession on the
CPU (or a mixture of experts, frameworks/pytorch/titan/moe_session.py's TitanMoESession, with a third
argument `deepseek_v3` or `qwen3_moe`), for tests/integration/test_llama3_torchtitan_cpu.py and
test_moe_layouts.py; run under torch.distributed.run.

torchtitan takes the device type "cuda" wherever there is no accelerator
(torchtitan.tools.utils.device_type), so this test helper, and only it, sets it to "cpu":
then its device mesh, parallelize_llama (FSDP2, tensor parallelism, replicate), pipeline_llm,
initialisation and forward run over gloo as they run on GPUs over NCCL. A training step stops
at FlexAttention's backward, which torch 2.13 has only on GPUs. Prints one JSON line.

    python -m torch.distributed.run --nproc-per-node 2 tests/titan_cpu_probe.py '{"fsdp": true}' GLOBAL [MODEL]
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torchtitan.distributed.parallel_dims as parallel_dims  # noqa: E402
import torchtitan.tools.utils as titan_utils  # noqa: E402

titan_utils.device_type, titan_utils.device_module, parallel_dims.device_type = "cpu", torch.cpu, "cpu"

from contract import parallel  # noqa: E402
from frameworks.common.distenv import DistEnv  # noqa: E402
from frameworks.pytorch.layouts import parallelize  # noqa: E402
from frameworks.pytorch.titan import session as titan  # noqa: E402
from tests.frameworks_env import model_cfg  # noqa: E402
from tests.runspecs import run_spec  # noqa: E402


def main(settings: dict, global_batch: int, model: str = "llama3") -> dict:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    lay, bad = parallel.resolve(settings, world, 1, None, global_batch)
    assert not bad, bad
    spec = run_spec(model=model_cfg(model, "tiny"), precision="fp32", amp_dtype=None,
                    compile=False, seed=0, parallel=lay.as_dict(), device="cpu",
                    rendezvous_timeout_s=60)
    dist = DistEnv(rank, world, rank, world, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    if model in ("deepseek_v3", "qwen3_moe"):
        import importlib

        from frameworks.pytorch.titan import moe_session as titan_moe
        session = titan_moe.session_of(importlib.import_module(f"frameworks.pytorch.models.{model}"))(spec, dist)
    else:
        session = titan.TitanSession(spec, dist)
    out = {"rank": rank, "record": session.parallel_record(), "samples": session.samples_per_step,
           "checksum": session.parameter_checksum()}
    if lay.pp == 1:   # the forward of the first micro-batch: its share of the global batch's loss
        with torch.no_grad():
            inputs, labels, extra = session._prepare(*session.micro[0])
            with session.context():
                loss, _ = session.loss_fn(session.parts[0](inputs, **extra), labels, session.tokens,
                                          positions=extra["positions"])
        out["forward_loss"] = float(parallelize.local(loss))
    try:
        session.step()
        out["step"] = "ok"
    except Exception as exc:  # noqa: BLE001 (the test reads which error stopped it)
        out["step"] = f"{type(exc).__name__}: {exc}"
    return out


if __name__ == "__main__":
    line = "PROBE " + json.dumps(main(json.loads(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:])) + "\n"
    os.write(1, line.encode())   # one write: the ranks' lines never interleave (a pipe's atomic write)
    os._exit(0)   # a rank whose peer stopped mid-step would wait on gloo at exit
