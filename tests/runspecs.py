"""Run specs and adapters for tests that drive the harness or an adapter's parts directly.
A spec.json always has every key RunSpec requires; `run_spec` fills those a test does not
care about. `stand_in` is the adapter of a test's stand-in session."""
import os
import tempfile

from contract.spec import RunSpec
from frameworks.registry import Adapter, Bench

# A repeat's folder of this process's own, never the checkout: rank 0's heartbeat goes to the
# folder above it (contract/paths.heartbeat_file), which for "." was the checkout's root.
RECORD_DIR = os.path.join(tempfile.mkdtemp(prefix="dlbench-runspec-"), "p", "repeat-00")
os.makedirs(RECORD_DIR)
DEFAULTS = {"point": "p", "repeat": 0, "framework": "none", "model": {"name": "none"},
            "precision": "fp32", "batch_size": 1, "warmup_steps": 0, "measure_steps": 1,
            "record_dir": RECORD_DIR}


def run_spec(fields=None, **more) -> RunSpec:
    """RunSpec of DEFAULTS, then `fields` (a mapping), then `more`."""
    return RunSpec.from_dict({**DEFAULTS, **(fields or {}), **more})


def stand_in(session, name="none", bench="train", **facts) -> Adapter:
    """An adapter whose one bench is `session(spec, dist)`: its data backends and OOM rule
    as `facts` give them (none: no data=files, the harness's MemoryError rule)."""
    return Adapter(name, {bench: Bench(session)}, **facts)
