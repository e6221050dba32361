"""`python -m launch status SWEEP`: placeholder replaced by the Slurm issue's status command."""
