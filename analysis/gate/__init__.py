"""The regression gate (`python -m analysis compare|reference`): reference files, published
sources and the results store as baselines (reference.py), a run's figures against them
(compare.py)."""
