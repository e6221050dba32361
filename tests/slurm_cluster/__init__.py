"""A real multi-node Slurm cluster on this machine, for integration tests.

See docs/slurm-test-cluster.md. CLI: python -m tests.slurm_cluster up|down|status|env
"""
from .cluster import ClusterError, LocalSlurmCluster, default_dir, skip_reason

__all__ = ["ClusterError", "LocalSlurmCluster", "default_dir", "skip_reason"]
