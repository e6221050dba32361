"""Published figures, as data (the *.yaml files here; README.md says their fields), and
their readers: throughput and Wide & Deep sources (sources.py), parallel layouts (layouts.py)."""
