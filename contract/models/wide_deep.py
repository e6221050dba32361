"""Wide & Deep, DLPerf's CTR case (conf/model/wide_deep.yaml, docs/special.md): its tables split
by rows over the ranks, its figure the latency per iteration and peak memory per rank against the
deep vocabulary size (its own report section, not the per-model throughput tables)."""
from contract.models import CLICKS, ModelSpec

SPEC = ModelSpec(
    name="wide_deep", pytorch_session="frameworks.pytorch.models.wide_deep:session",
    report="wide_deep", tables=False, metric="latency_ms", compare_keys=("deep_vocab_size", "embedding"),
    inputs=CLICKS)
