"""Checkpoints through torch.distributed.checkpoint (docs/checkpoint.md): dcp.py (a rank's state
saved, committed, loaded and compared; the folder of its saves), bench.py (bench=checkpoint's
measuring loop) and training.py (checkpoint.every around a training session).
"""
