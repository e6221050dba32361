"""bench=comm over 2 and 3 nodes of the real local Slurm cluster: gloo between network
namespaces, every result checked, read back with analysis/figures/comm.py. No mock of Slurm."""
import glob
import json

import pytest

from analysis import load
from analysis.figures.comm import comm_table
from tests.integration.test_comm_local import SIZES, SMALL
from tests.integration.test_slurm_launcher import launch, status

pytestmark = pytest.mark.slurm


def test_comm_sweep_over_two_and_three_nodes(slurm_cluster, tmp_path):
    sweep = tmp_path / "comm"
    submitted = launch("-m", "bench=comm", "bench.ops=[all_reduce,all_gather]", *SMALL,
                       "launcher=slurm", "cluster=localtest", "nodes=2,3", "gpus_per_node=1",
                       f"hydra.sweep.dir={sweep}")
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    done = status(sweep, "--wait", "--timeout", "600")
    assert done.returncode == 0, done.stdout + done.stderr
    df = comm_table(load(sweep))
    for nodes in (2, 3):
        rows = df[df.nodes == nodes]
        assert set(rows.op) == {"all_reduce", "all_gather"}
        # all_gather on 3 ranks rounds each size down to whole per-rank chunks
        for op, per_op in rows.groupby("op"):
            assert per_op.bytes.nunique() == len(SIZES), op
        assert set(rows[rows.op == "all_reduce"].bytes) == set(SIZES)
        assert (rows.wrong == 0).all() and (rows.busbw_avg > 0).all()
    hosts = {json.load(open(f))["host"] for f in glob.glob(f"{sweep}/points/*3x1/repeat-00/rank-*.json")}
    assert hosts == {"node1", "node2", "node3"}
