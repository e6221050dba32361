"""torchtitan's path on GPUs: its models, parallelize functions and pipeline under the suite's
harness. session.py: TitanSession (Llama 3's, and the base); moe_session.py: a mixture of
experts' (the family module names its torchtitan config, sharding and parallelize function).
torchtitan is imported lazily: it is installed beside the suite's torch with --no-deps
(requirements-torchtitan.txt), and no CPU rank needs it.
"""
