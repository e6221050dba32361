"""The method and the figures computed by it, as functions of rows and columns (no file read
here): the method's arithmetic (method.py), a repeat's and a point's figures (points.py),
FLOP counts and device peaks (flops.py), each point's latency, memory, tokens/s and FLOPs
(metrics.py), the checkpoint's and the collectives' figures (checkpoint.py, comm.py), the
training points the main tables and plots show (training.py), and one rule for what matches
what (matching.py)."""
