"""The training points: those the report's main tables and its plots show (training on
synthetic data, of the models without a section of their own, without checkpoints), and each
point's data settings from its point.json (Results.manifests). The input pipeline's section
(analysis/sections/input_pipeline.py) compares training from files with them.
"""
import pandas as pd

from analysis import tables
from contract import models


def data_of(results, row) -> dict:
    """The point's data settings; a point written before `data` existed is synthetic."""
    config = (results.manifests.get((row.sweep, row.point)) or {}).get("config") or {}
    return config.get("data") or {"source": "synthetic"}


def with_data(results, points: pd.DataFrame) -> pd.DataFrame:
    data = [data_of(results, r) for r in points.itertuples()]
    workers = [d.get("workers") for d in data]
    return points.assign(data=[d.get("source", "synthetic") for d in data],
                         workers=["auto" if w is None else str(w) for w in workers],
                         mode=[tables.mode_of(r) for r in points.itertuples()])


def training_points(results) -> pd.DataFrame:
    """The points of the report's main tables and of its plots: training on synthetic data,
    of the models without a section of their own (analysis/sections/special.py), without
    checkpoints. Training from files is compared with them in the input pipeline's table;
    training with checkpoint.every in the checkpoint section."""
    p = results.points
    own = models.named(lambda s: not s.tables)   # in their own sections only (analysis/sections/special.py)
    train = p[(p.bench == "train") & ~p.model.isin(own)] if len(p) else p
    if "checkpoint" in train:
        train = train[train.checkpoint.isna()]
    if train.empty:
        return train
    return train[with_data(results, train).data.values == "synthetic"]
