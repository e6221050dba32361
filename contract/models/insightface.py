"""InsightFace-style face classification with the softmax sharded over the ranks (partial FC;
conf/model/insightface.yaml, docs/special.md): its figure the largest num_classes that trains
(a search), in its own report section, not the per-model throughput tables."""
from contract.models import IMAGES, ModelSpec

SPEC = ModelSpec(
    name="insightface",
    pytorch_session="frameworks.pytorch.models.insightface:session",
    report="insightface", tables=False, compare_keys=("num_classes",), inputs=IMAGES)
