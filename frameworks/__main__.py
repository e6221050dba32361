"""`python -m frameworks --spec SPEC`: the worker command for every framework.

Run from the repository root by the framework's own interpreter; it reads the typed run spec
(contract/spec.py) and runs the harness (frameworks/common/harness.py) on the session the
framework's adapter declares (frameworks/registry.py)."""
import os
import sys

from frameworks.common import harness

os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # quiet gloo's "hostname" warning
code = harness.main()
# The record is saved: leave without running interpreter teardown, where some
# frameworks' static destructors hang (seen with MXNet and gloo). That teardown is also
# what ends a data loader's worker processes; left alive they sleep for good (seen with
# PaddlePaddle's DataLoader), so end them here.
if "multiprocessing" in sys.modules:
    for child in sys.modules["multiprocessing"].active_children():
        child.kill()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
