"""The `slurm_cluster` fixture: a real local multi-node Slurm cluster.

tests/conftest.py loads it with `pytest_plugins`.
See docs/slurm-test-cluster.md.
"""
from __future__ import annotations

import pytest

from tests.slurm_cluster import LocalSlurmCluster, default_dir, skip_reason



def pytest_configure(config):
    config.addinivalue_line("markers", "slurm: needs the local multi-node Slurm test cluster (root)")


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running LocalSlurmCluster; os.environ points Slurm clients at it.

    Reuses a cluster already up in $DLBENCH_SLURM_DIR (e.g. from `make slurm-up`)
    and then leaves it running; otherwise starts one (3 nodes x 2 fake GPUs)
    and stops it at the end of the session.
    """
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = LocalSlurmCluster.load(default_dir())
    started = False
    if cluster is None or not cluster.is_up():
        cluster = LocalSlurmCluster(default_dir())
        started = cluster.up()
    # Clients (sbatch, srun, submitit) inherit os.environ: it points at the cluster.
    try:
        with cluster.as_client():
            yield cluster
    finally:
        if started:
            cluster.down()


@pytest.fixture(scope="session")
def test_image():
    """The suite's test image (tests/container_image: Debian 12, its own Python and torch),
    built once if `make image` has not (about a minute), else the cached file."""
    from tests import container_image
    reason = container_image.skip_reason()
    if reason:
        pytest.skip(reason)
    return str(container_image.build())
