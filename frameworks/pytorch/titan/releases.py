"""The torchtitan releases the GPU path drives, and what each needs, written once: 0.3.0 (the
suite's .venv; torch 2.13 or newer) and 0.2.2 (torch 2.11, the release the lent GPU machines
carry: tests/versions/torch-2.11). Their APIs differ (module paths, config classes, model
arguments, the loss's reduction): session.py and moe_session.py call 0.3.0's, v022.py turns
those calls into 0.2.2's. Which runs is the one installed (`current`), where this torch can load
it (session.py: choose); only one is installed in an environment.

Each release: the torch it needs (a `versions.Release` on torchtitan's path, so its line reads
as the adapter's do), the modules its path imports (checked before a point takes it:
session.py's unavailable), and the families it builds (0.2.2: Llama 3 and DeepSeek-V3, as
v022.py maps their shapes onto its argument classes; Qwen3's MoE and GPT-OSS train the
suite's own definitions there).
"""
from dataclasses import dataclass

from contract import versions

TORCH = "torch"


@dataclass(frozen=True, eq=False)   # hashed by identity: one entry per release
class TitanRelease:
    version: str
    needs: tuple          # versions.Release(...) of torch, when=TORCHTITAN
    imports: tuple        # "module:attribute" its path imports, Llama 3's
    parallelize: dict | None = None   # MoE family -> "module:attribute"; None: the family's own names
    families: tuple = ()  # the families it builds; () = every one
    runtime: tuple = ()   # what its MoE path calls of torch at run time, beyond its imports
    ties: bool = True     # whether its Llama 3 ties the output to the embedding (the 1B's)

    def builds_not(self, spec, family):
        """Why this release's path does not build the point's model, or None."""
        if family is not None and self.families and _name(family) not in self.families:
            return (f"does not build {_name(family)} here (frameworks/pytorch/titan/releases.py: "
                    f"its path builds {' and '.join(self.families)})")
        if spec.model.get("tie_embeddings") and not self.ties:
            return "does not tie the output to the embedding (Llama 3.2 1B's)"
        return None

    def references(self, family) -> tuple:
        """What a mixture of experts' path needs beyond `imports` (none for Llama 3): its
        parallelize function (and 0.3.0's sharding declarations, the family module's TITAN_*)."""
        if family is None or not hasattr(family, "TITAN_PARALLELIZE"):
            return ()
        if self.parallelize is None:
            return (family.TITAN_PARALLELIZE, family.TITAN_SHARDING) + self.runtime
        own = self.parallelize.get(_name(family))   # None: a family it does not build (builds_not)
        return ((own,) + self.runtime) if own else ()


def _name(family) -> str:
    return family.__name__.rsplit(".", 1)[-1]


V030 = TitanRelease(
    "0.3.0",
    needs=(versions.Release(TORCH, "2.13.0", "torchtitan 0.3.0 imports torch.distributed.fsdp's "
                                    "DataParallelMeshDims, new in 2.13", when=versions.TORCHTITAN),),
    imports=("torchtitan.components.loss:CrossEntropyLoss", "torchtitan.config:DebugConfig",
             "torchtitan.distributed:ParallelDims", "torchtitan.distributed.utils:clip_grad_norm_",
             "torchtitan.distributed.pipeline_parallel:pipeline_llm",
             "torchtitan.models.llama3:parallelize_llama",
             "torchtitan.models.llama3.sharding:set_llama3_sharding_config"),
    # its MoE token dispatcher's tracing check (models/common/token_dispatcher.py) and its FSDP
    # of experts over ep (distributed/fsdp.py): torch 2.11 lacks both
    runtime=("torch.compiler:_is_non_strict_tracing",
             "torch.distributed.fsdp._fully_shard._fsdp_common:ShardPlacementResult"))

V022 = TitanRelease(
    "0.2.2",
    needs=(versions.Release(TORCH, "2.11.0", "the oldest torch torchtitan 0.2.2 was run with here "
                                    "(tests/versions/torch-2.11)", when=versions.TORCHTITAN),),
    imports=("torchtitan.components.loss:build_cross_entropy_loss", "torchtitan.config:JobConfig",
             "torchtitan.distributed:ParallelDims", "torchtitan.distributed.utils:clip_grad_norm_",
             "torchtitan.distributed.pipeline_parallel:pipeline_llm",
             "torchtitan.models.llama3:Transformer",
             "torchtitan.components.optimizer:build_optimizers_with_moe_load_balancing"),
    parallelize={"deepseek_v3": "torchtitan.models.deepseek_v3:parallelize_deepseekv3"},
    families=("llama3", "deepseek_v3"), ties=False)

RELEASES = (V030, V022)   # newest first


def of(version):
    """The release entry a torchtitan version is driven as: the newest not newer than it (a
    0.3.1 as 0.3.0), or None where it is older than every one (the adapter's releases refuse it)."""
    for release in RELEASES:
        if not versions.older(version, release.version):
            return release
    return None


def torch_gap(release: TitanRelease, torch_version: str):
    """Why this torch cannot load the release (its `needs`, in versions.gaps's words), or None."""
    bad = versions.gaps(release.needs, {TORCH: torch_version}, {versions.TORCHTITAN})
    return "; ".join(bad) or None


def current():
    """The entry of the torchtitan installed here (importlib.metadata), or None."""
    have = versions.installed(versions.Release("torchtitan", "0", ""))
    return of(have) if have else None
