"""torchtitan 0.2.2's calls, where TitanSession (session.py) and TitanMoESession (moe_session.py)
make 0.3.0's: 0.2.2 is the release torch 2.11 loads (releases.py), the torch of the lent GPU
machines. What differs, and only that:
- the model: its argument classes (Llama 3's TransformerModelArgs, DeepSeek-V3's
  DeepSeekV3ModelArgs with MoEArgs) where 0.3.0 has config builders; Llama 3's SwiGLU width
  is `multiple_of` x ceil(8 dim / 3 x ffn_dim_multiplier / multiple_of) there, so `ffn_hidden`
  is set as multiple_of (the multiplier shrinks 8 dim / 3 where it exceeds it); RoPE's Llama
  3.1 scaling always applies (factor 1: none), DeepSeek-V3's YaRN where the sequence exceeds
  original_seq_len; FlexAttention with a causal mask (DeepSeek-V3's context parallelism takes
  SDPA: 0.2.2's allows no other); the arguments' update_from_config, as its Trainer calls it;
- its configs: one JobConfig (parallelism, training, compile, activation checkpointing, seed)
  for parallelize_llama / parallelize_deepseekv3 / pipeline_llm, which take it whole; no
  sequence-parallel switch (its tensor parallelism always is) and no spmd backend;
- ParallelDims from the degrees; its Trainer's train context (loss parallel with tp) and AMP
  context (autocast where FSDP does not cast);
- the loss: a sum over the micro-batch's tokens, divided here by the global batch's token
  count (as its Trainer divides before backward; in a pipeline too, whose schedule 0.2.2 builds
  without scaling its gradients);
- the masks from the input batch (no tokenizer: a causal mask), positions left to the model;
- MoE load balancing: its expert-bias update is a hook its optimizer container registers
  (build_optimizers_with_moe_load_balancing); the hook is taken from that container onto the
  suite's optimizer, before each of its steps, as 0.3.0's register_moe_load_balancing_hook does.
"""
import contextlib
import tempfile
import types

import torch

from frameworks.pytorch.titan import releases, settings
from frameworks.registry import resolve


def llama3_args(cfg: dict):
    """torchtitan 0.2.2's TransformerModelArgs of a Llama 3 shape (module docstring)."""
    from torchtitan.models.llama3.model.args import RoPEScalingArgs, TransformerModelArgs
    dim, hidden = cfg["hidden"], cfg["ffn_hidden"]
    base = int(8 * dim / 3)   # int(2 x 4 dim / 3), FeedForward's
    scaling = cfg.get("rope_scaling") or {}
    rope = (RoPEScalingArgs(scaling_factor=scaling["factor"], low_freq_factor=scaling["low_freq_factor"],
                            high_freq_factor=scaling["high_freq_factor"],
                            original_max_position_embeddings=scaling["original_max_position_embeddings"])
            if scaling else RoPEScalingArgs(scaling_factor=1.0))
    return TransformerModelArgs(
        dim=dim, n_layers=cfg["layers"], n_heads=cfg["heads"], n_kv_heads=cfg["kv_heads"],
        vocab_size=cfg["vocab_size"], multiple_of=hidden,
        ffn_dim_multiplier=None if base <= hidden else hidden / base,
        norm_eps=cfg.get("norm_eps", 1e-5), rope_theta=cfg["rope_theta"], rope_scaling_args=rope,
        max_seq_len=cfg["seq_len"], attn_type="flex", attn_mask_type="causal")


def deepseek_v3_args(cfg: dict, cp: int):
    """torchtitan 0.2.2's DeepSeekV3ModelArgs of a DeepSeek-V3 shape (module docstring)."""
    from torchtitan.models.deepseek_v3.model.args import DeepSeekV3ModelArgs
    from torchtitan.models.moe import MoEArgs
    yarn = cfg.get("rope_scaling") or {}
    moe = MoEArgs(num_experts=cfg["experts"], num_shared_experts=cfg["shared_experts"],
                  score_func=cfg["score_func"], route_norm=bool(cfg.get("route_norm")),
                  route_scale=cfg.get("route_scale", 1.0), score_before_experts=False,
                  top_k=cfg["top_k"], num_expert_groups=cfg.get("expert_groups"),
                  num_limited_groups=cfg.get("limited_groups"),
                  load_balance_coeff=cfg.get("load_balance_coeff"))
    return DeepSeekV3ModelArgs(
        vocab_size=cfg["vocab_size"], dim=cfg["hidden"], inter_dim=cfg["ffn_hidden"],
        moe_inter_dim=cfg["moe_hidden"], n_layers=cfg["layers"], n_dense_layers=cfg["dense_layers"],
        n_heads=cfg["heads"], norm_eps=cfg.get("norm_eps", 1e-5), moe_args=moe,
        q_lora_rank=cfg["q_lora_rank"], kv_lora_rank=cfg["kv_lora_rank"],
        qk_nope_head_dim=cfg["qk_nope_head_dim"], qk_rope_head_dim=cfg["qk_rope_head_dim"],
        v_head_dim=cfg["v_head_dim"], mscale=cfg["mscale"], rope_theta=cfg["rope_theta"],
        rope_factor=yarn.get("factor", 1.0), beta_fast=yarn.get("beta_fast", 32),
        beta_slow=yarn.get("beta_slow", 1),
        original_seq_len=yarn.get("original_seq_len", max(4096, cfg["seq_len"])),
        max_seq_len=cfg["seq_len"], attn_type="sdpa" if cp > 1 else "flex", attn_mask_type="causal")


# family name -> (its arguments of a point, its model class)
MODELS = {"llama3": (lambda cfg, layout: llama3_args(cfg), "torchtitan.models.llama3:Transformer"),
          "deepseek_v3": (lambda cfg, layout: deepseek_v3_args(cfg, layout.cp),
                          "torchtitan.models.deepseek_v3:DeepSeekV3Model")}


def job_config(spec, layout, dump: str):
    """torchtitan 0.2.2's JobConfig of a point (module docstring)."""
    from torchtitan.config import JobConfig
    from torchtitan.config.job_config import ActivationCheckpoint, Compile, Debug, Parallelism, Training

    cfg, amp = spec.model, spec.precision == "amp"
    job = JobConfig()
    parallelism = settings.parallelism_settings(layout)
    for name in ("enable_sequence_parallel", "spmd_backend"):   # 0.3.0's only
        del parallelism[name]
    job.parallelism = Parallelism(**parallelism)
    job.training = Training(**settings.batch_settings(layout), seq_len=cfg["seq_len"], max_norm=1.0,
                            mixed_precision_param="bfloat16" if amp else "float32",
                            mixed_precision_reduce="float32")
    job.compile = Compile(enable=bool(spec.compile), components=["model", "loss"])
    job.activation_checkpoint = ActivationCheckpoint(mode="full" if cfg.get("recompute") else "none")
    job.debug = Debug(seed=spec.seed)
    job.job.dump_folder = dump
    return job


def gap(spec, layout):
    """What 0.2.2's path cannot do that 0.3.0's can, or None."""
    if layout.tp > 1 and not layout.sequence_parallel:
        return ("torchtitan 0.2.2's tensor parallelism is always sequence-parallel: "
                "set parallel.sequence_parallel=true")
    if spec.model.get("dispatch", "standard") != "standard":
        return "torchtitan 0.2.2 is driven here with torch's all-to-all dispatch only (model.dispatch=standard)"
    return None


class Titan022:
    """TitanSession's release-specific steps as torchtitan 0.2.2 takes them (module docstring);
    first in the class's bases (session.py: for_release), so these override 0.3.0's."""

    def _titan(self):
        from torchtitan.components.loss import build_cross_entropy_loss
        from torchtitan.distributed import ParallelDims
        from torchtitan.distributed import utils as dist_utils
        from torchtitan.distributed.pipeline_parallel import pipeline_llm
        return types.SimpleNamespace(build_cross_entropy_loss=build_cross_entropy_loss,
                                     ParallelDims=ParallelDims, dist_utils=dist_utils, pipeline_llm=pipeline_llm)

    @property
    def _name(self) -> str:
        family = getattr(self, "family", None)
        return family.__name__.rsplit(".", 1)[-1] if family is not None else "llama3"

    def _gap(self, spec):
        return super()._gap(spec) or gap(spec, self.layout)

    def _configs(self, spec):
        self.dump = tempfile.mkdtemp(prefix="dlbench-torchtitan-")   # its dump_folder (session.py: close)
        return {"job": job_config(spec, self.layout, self.dump)}

    def _mesh(self, spec):
        job, dist_utils = self.titan_configs["job"], self.titan.dist_utils
        p = job.parallelism
        self.dims = self.titan.ParallelDims(
            dp_replicate=p.data_parallel_replicate_degree, dp_shard=p.data_parallel_shard_degree,
            cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
            ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree, world_size=self.dist.world_size)
        self.dims.build_mesh()
        train = dist_utils.get_train_context(self.dims.tp_enabled and not p.disable_loss_parallel)
        amp = dist_utils.maybe_enable_amp(self.dims, job.training.mixed_precision_param, self.device.type)

        @contextlib.contextmanager
        def context():
            with train(), amp:
                yield
        self.context = context
        dist_utils.set_determinism(self.dims, self.device, job.debug, distinct_seed_mesh_dims=["pp"])

    def _config(self, spec):
        args = MODELS[self._name][0](spec.model, self.layout)
        args.update_from_config(self.titan_configs["job"])   # as its Trainer does
        return args

    def _build(self, args):
        return resolve(MODELS[self._name][1])(args)

    def _parallelize_fn(self):
        return resolve(releases.V022.parallelize.get(self._name, "torchtitan.models.llama3:parallelize_llama"))

    def _parameters(self, seq_len: int) -> int:
        with torch.device("meta"):
            model = self._build(self.config)
        return self.config.get_nparams_and_flops(model, seq_len)[0]

    def _model(self, spec):
        self.config = self._config(spec)
        with torch.device("meta"):
            model = self._build(self.config)
        total = self.titan.build_cross_entropy_loss(self.titan_configs["job"])
        self.loss_fn = lambda pred, labels: total(pred, labels) / self.tokens   # the global mean's part
        return model

    def _parts(self, model):
        job = self.titan_configs["job"]
        if self.layout.pp > 1:
            self.schedule, self.parts, self.first, self.last = self.titan.pipeline_llm(
                model, self.dims, job, self.device, self.config, self._parallelize_fn(), self.loss_fn)
        else:
            self.schedule, self.first, self.last = None, True, True
            self.parts = [self._parallelize_fn()(model, self.dims, job)]
        self._materialize(job.training.max_norm)

    def _after_optimizer(self):
        if getattr(self, "family", None) is None:
            return
        from torchtitan.components.optimizer import build_optimizers_with_moe_load_balancing
        from torchtitan.config.job_config import Optimizer
        container = build_optimizers_with_moe_load_balancing(self.parts, Optimizer(implementation="for-loop"),
                                                             self.dims)
        for hook in container._optimizer_step_pre_hooks.values():   # its expert-bias update, if any
            self.optimizer.register_step_pre_hook(hook)

    def _prepare(self, input_dict, labels):
        inputs = input_dict["input"]
        extra = {}
        if self.config.attn_type == "flex":
            extra["attention_masks"] = self.parts[0].get_attention_masks(input_batch=inputs, tokenizer=None)
        if self.dims.cp_enabled:
            from torchtitan.distributed.context_parallel import prepare_context_parallel_input
            inputs, labels, extra = prepare_context_parallel_input(
                inputs, labels, extra, self.dims.get_mesh("cp"), self.device,
                self.titan_configs["job"].parallelism.context_parallel_load_balancer)
        return inputs, labels, extra

    def _loss(self, pred, labels, extra):
        return self.loss_fn(pred, labels)

    def _pipeline_loss_kwargs(self):
        return None

