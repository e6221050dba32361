import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The local Slurm cluster fixture (tests/integration/conftest_slurm.py).
pytest_plugins = ["tests.integration.conftest_slurm"]
