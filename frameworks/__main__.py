"""`python -m frameworks --spec SPEC`: the worker command for every framework.

Run from the repository root by the framework's own interpreter; it imports
frameworks.<spec.framework>.worker and runs the harness (frameworks/common/harness.py)."""
import os

from frameworks.common import harness

os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # quiet gloo's "hostname" warning
raise SystemExit(harness.main())
