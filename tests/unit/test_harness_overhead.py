"""benchmarks/harness_overhead.py's bad input: one line and exit 2, before any sweep."""
import importlib.util
import os

from tests.frameworks_env import ROOT


def _module():
    spec = importlib.util.spec_from_file_location("harness_overhead", os.path.join(ROOT, "benchmarks",
                                                                                   "harness_overhead.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_unknown_model_gets_one_line_and_exit_2(capsys):
    assert _module().main(["--models", "resnet50,nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("harness_overhead: unknown model nope (the models: ")
    assert "resnet50" in err[0]
