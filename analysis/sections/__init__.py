"""The report's sections, each a function of Results to Markdown (their order is
analysis/report/contents.py's): the summary, per model its main and detail tables, the
special models (special.py dispatches to llama.py, moe.py and its own), the input pipeline,
checkpoints, published figures, collectives, traces, the environment, preflight's health and
the failures."""
