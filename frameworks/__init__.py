"""One package per framework (frameworks/<name>/), each declaring its adapter in its
__init__.py for the registry (frameworks/registry.py), and the worker's runtime they share
(frameworks/common/). `python -m frameworks --spec SPEC` is the worker (__main__.py)."""
