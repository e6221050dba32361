"""PyTorch's models, one module each, named as its spec (contract/models/<name>.py): each
model's definition with its tensor-parallel plan and its session beside it, `session(spec,
dist)`, the one its spec's `pytorch_session` names (frameworks/pytorch/worker.py imports it).
Adding a model adds its module here and edits nothing else in frameworks/pytorch/
(docs/architecture.md, "How to add a model").

What a model module provides, by the session it trains in:
- the plain data-parallel session (frameworks/pytorch/session.py's TorchSession: resnet50.py,
  bert_base.py): `Model(**cfg)` and `loss_fn(outputs, *labels)`, built by name here
  (`build_model`), with frameworks/common/synthetic.py's batch (`synthetic_batch`);
- DLPerf's special cases (wide_deep.py, insightface.py): a session of their own over
  session.SpecialSession;
- a language model at any layout (frameworks/pytorch/lm_session.py): a model family, as
  gpt.py says (`Model`, `tied`, `loss_fn`, `full_value`, `parameter_count`,
  `synthetic_tokens`, `tp_plan`); a mixture of experts uses the MoE layer (moe.py) and, on
  GPUs, torchtitan's model (frameworks/pytorch/titan/moe_session.py: `titan_config`,
  `TITAN_*`), as deepseek_v3.py.

The functions here are the plain models' surface that tests, benchmarks and the other
frameworks' definitions compare against (the same parameter counts, the same batch).
Standard library + torch only: this runs in the framework's Python.
"""
import importlib

import torch

from frameworks.common import choices, synthetic

OPTIMIZERS = {
    "sgd": lambda o, params: torch.optim.SGD(params, lr=o["lr"], momentum=o.get("momentum", 0.0),
                                             weight_decay=o.get("weight_decay", 0.0)),
    "adamw": lambda o, params: torch.optim.AdamW(params, lr=o["lr"], weight_decay=o["weight_decay"]),
    "adam": lambda o, params: torch.optim.Adam(params, **{k: v for k, v in o.items() if k != "name"}),
}


def definition(name: str):
    """The module of model `name` (frameworks/pytorch/models/<name>.py)."""
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise ValueError(f"unknown model {name!r}: no frameworks/pytorch/models/{name}.py") from None


def build_model(model_cfg):
    """(model, loss_fn(outputs, *labels)) of a plain model (module docstring)."""
    module = definition(model_cfg["name"])
    return module.Model(**model_cfg), module.loss_fn


def synthetic_batch(model_cfg, batch_size, device, seed):
    """Fixed random inputs made once on the device (frameworks/common/synthetic.py: the
    same values in every framework), as DLPerf's synthetic-data runs."""
    inputs, labels = synthetic.arrays(model_cfg, batch_size, seed)
    t = lambda arrays: tuple(torch.from_numpy(a).to(device) for a in arrays)  # noqa: E731
    return t(inputs), t(labels)


def build_optimizer(model_cfg, params):
    opt = model_cfg["optimizer"]
    return choices.pick(OPTIMIZERS, opt["name"], "optimizer")(opt, params)


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())  # tied weights count once


def parameter_count(model_cfg: dict) -> int:
    """The count every framework's definition must match (tests/unit/test_models.py)."""
    return count_parameters(build_model(model_cfg)[0])
