"""The report's plots: what they draw, aggregated without matplotlib (data.py), drawn in a
second process (process.py) by draw.py and checkpoint.py, in one style (style.py)."""
