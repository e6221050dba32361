"""One rank of torchtitan's Llama 3 built by frameworks/pytorch/titan/session.py's TitanSession on the
CPU, through the torchtitan release installed (0.3.0, or 0.2.2 under torch 2.11: releases.py)
(or a mixture of experts, frameworks/pytorch/titan/moe_session.py's TitanMoESession, with a third
argument naming one: `deepseek_v3`, `qwen3_moe`, `gpt_oss`), for
tests/integration/test_llama3_torchtitan_cpu.py and test_moe_layouts.py: a probe's `main`, run
in the ranks of tests/rank_probes.py. A fourth argument `amp` trains in bf16 AMP (GPT-OSS's torchtitan model
trains in bf16 only) with FlexAttention eager (compiled, the CPU has no log-sum-exp, which
GPT-OSS's sinks need: "torch.compile on CPU only supports inference and `return_lse` is not
supported yet").

torchtitan takes the device type "cuda" wherever there is no accelerator
(torchtitan.tools.utils.device_type), so this test helper, and only it, sets it to "cpu" (and
0.2.2's attention masks' device, cuda there too):
then its device mesh, parallelize_llama (FSDP2, tensor parallelism, replicate), pipeline_llm,
initialisation and forward run over gloo as they run on GPUs over NCCL. A training step stops
at FlexAttention's backward, which torch 2.13 has only on GPUs. Gives one JSON line a case;
several cases run in one set of processes (tests/rank_probes.py), each case's arguments a list
(a pipeline's case last: its stopped step leaves its group broken):

    rank_probes.run("tests/titan_cpu_probe.py", [{"ranks": 2, "args": [{"fsdp": True}, GLOBAL, MODEL, "fp32"]}])

MODEL: a model's name (its tiny size), or its resolved settings as JSON.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torchtitan.distributed.parallel_dims as parallel_dims  # noqa: E402
import torchtitan.tools.utils as titan_utils  # noqa: E402

titan_utils.device_type, titan_utils.device_module, parallel_dims.device_type = "cpu", torch.cpu, "cpu"
try:   # torchtitan 0.2.2 makes its FlexAttention masks on create_block_mask's default device, cuda
    import functools

    import torchtitan.models.attention as titan_attention  # noqa: E402
    titan_attention._compiled_create_block_mask = functools.partial(
        titan_attention._compiled_create_block_mask, device="cpu")
except ImportError:   # 0.3.0 makes them on its inputs' device
    pass
from torch._inductor import cpu_vec_isa  # noqa: E402

if not hasattr(cpu_vec_isa.VecISA, "_build_probe_env"):
    # torch 2.11's inductor checks each vector ISA by loading a test library in a child Python that
    # imports torch first: 6 children a rank, 2 s of CPU each (half of the 0.2.2 test's). torch
    # 2.13's check, here too: the same load, torch's libraries found on LD_LIBRARY_PATH instead.
    _torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    _subprocess_env = cpu_vec_isa.python_subprocess_env
    cpu_vec_isa.python_subprocess_env = lambda: dict(_subprocess_env(), LD_LIBRARY_PATH=os.pathsep.join(
        filter(None, [_torch_lib, os.environ.get("LD_LIBRARY_PATH")])))
    cpu_vec_isa.VecISA._avx_py_load = 'from ctypes import cdll\ncdll.LoadLibrary("__lib_path__")\n'

from contract import models, parallel  # noqa: E402
from frameworks.common.distenv import DistEnv  # noqa: E402
from frameworks.pytorch.layouts import parallelize  # noqa: E402
from frameworks.pytorch.titan import releases  # noqa: E402
from frameworks.pytorch.titan import session as titan  # noqa: E402
from tests.runspecs import run_spec  # noqa: E402


def main(settings: dict, global_batch: int, model: str = "llama3", precision: str = "fp32"):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if model.startswith("{"):   # a resolved model's settings (torch 2.11's environment has no OmegaConf)
        cfg = json.loads(model)
    else:
        from tests.frameworks_env import model_cfg
        cfg = model_cfg(model, "tiny")
    model = cfg["name"]
    lay, bad = parallel.resolve(settings, world, 1, None, global_batch)
    assert not bad, bad
    restore = None
    if precision == "amp":
        from torch.nn.attention.flex_attention import flex_attention
        from torchtitan.models.common.attention import FlexAttention
        compiled = FlexAttention._compiled_flex_attn
        FlexAttention._compiled_flex_attn = flex_attention

        def restore():   # the next case's FlexAttention compiled again
            FlexAttention._compiled_flex_attn = compiled
    spec = run_spec(model=cfg, precision=precision,
                    amp_dtype="bf16" if precision == "amp" else None, compile=False, seed=0,
                    parallel=lay.as_dict(), device="cpu", rendezvous_timeout_s=60)
    dist = DistEnv(rank, world, rank, world, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    if models.get(model).experts:
        import importlib

        from frameworks.pytorch.titan import moe_session as titan_moe
        cls = titan_moe.session_of(importlib.import_module(f"frameworks.pytorch.models.{model}"))
    else:
        cls = titan.TitanSession
    session = titan.for_release(cls, releases.current())(spec, dist)   # 0.3.0's calls, or 0.2.2's
    out = {"rank": rank, "record": session.parallel_record(), "samples": session.samples_per_step,
           "checksum": session.parameter_checksum(),
           "optimizer_hooks": len(session.optimizer._optimizer_step_pre_hooks)}   # MoE: load balancing
    if lay.pp == 1:   # the forward of the first micro-batch: its share of the global batch's loss
        try:
            with torch.no_grad():
                inputs, labels, extra = session._prepare(*session.micro[0])
                with session.context():
                    loss = session._loss(session.parts[0](inputs, **extra), labels, extra)
            out["forward_loss"] = float(parallelize.local(loss))
        except Exception as exc:  # noqa: BLE001 (0.2.2's router counts tokens with a histc the CPU lacks)
            out["forward"] = f"{type(exc).__name__}: {exc}"
    try:
        session.step()
        out["step"] = "ok"
    except Exception as exc:  # noqa: BLE001 (the test reads which error stopped it)
        out["step"] = f"{type(exc).__name__}: {exc}"
        if exc.__cause__ is not None:   # torch 2.11's pipeline stage names its cause only here
            out["step"] += f" (from {type(exc.__cause__).__name__}: {exc.__cause__})"
    if lay.pp > 1:   # a rank whose peer stopped mid-step would wait on gloo: no next case
        return out, None

    def close():
        session.close()
        if restore is not None:
            restore()
    return out, close

