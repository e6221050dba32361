from tests.integration.conftest_slurm import *  # noqa: F401,F403
