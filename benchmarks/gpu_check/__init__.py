"""`make gpu-check`: every GPU path of the suite once, each stage bounded, in one command
(issue 42), for a lent GPU machine or a site's first GPU node; `make gpu-check DEVICE=cpu`
rehearses every stage at tiny sizes on a CPU (tests/integration/test_gpu_check.py, in CI).

    python3 -m benchmarks.gpu_check [--device cuda|cpu] [--budget S] [--out DIR]

- environment.py: the wheels carried in .whl/ installed where the suite does not import (the
  lent machine's python3: torch 2.11, Python 3.12, no network), and the first lines: which
  torch, CUDA, devices, torchtitan (and whether it loads) and Python were found, and whether
  the suite imports;
- stages.py: the stages, their commands at each device's sizes and their time limits;
- runner.py: each stage in its own process group under its limit, skipped when the budget
  left cannot hold it, its log kept;
- figures.py: each stage's figure from its folder, the published figure for the device
  beside it (analysis/published/) and the ratio, or the harness's figure beside a bare loop;
- bare.py: the training step as a bare loop (the suite's model with no harness, and
  torchvision's ResNet-50), for the harness/bare ratio;
- pair.py: a point's harness (its real rank) and its bare loops, rounds alternated in one
  stage, in the rank's environment; ratio.py: their ratio, its spread, and whether the spread
  includes 1.0 (within noise);
- __main__.py: the order of all that, the table, and one tarball of every sweep and log.
Standard library only until the environment is known (environment.py), then the suite's.
"""
