"""Bad command lines are caught before anything runs, in one line."""
import pytest

from launchers.plan import precheck


@pytest.mark.parametrize("argv,message", [
    (["framework=foo"], "unknown framework 'foo' (valid: "),
    (["-m", "model=resnet50,gpt9"], "unknown model 'gpt9'"),
    (["precision=fp8"], "unknown precision 'fp8' (valid: amp, fp32)"),
    (["batch_size=0"], "batch_size must be an integer >= 1, got 0"),
    (["batch_size=most"], "batch_size must be an integer >= 1, got 'most'"),
    (["-m", "batch_size=8,-1"], "batch_size must be an integer >= 1, got -1"),
    (["measure_steps=0"], "measure_steps must be an integer >= 1"),
    (["warmup_steps=-1"], "warmup_steps must be an integer >= 0"),
    (["nodes=0"], "nodes must be an integer >= 1"),
    (["repeats=two"], "repeats must be an integer >= 1, got 'two'"),
    (["batchsize=8"], "unknown key 'batchsize'"),
    (["output_root=/proc/nope"], "output folder '/proc/nope' cannot be written"),
])
def test_bad_input(argv, message):
    assert message in (precheck.check(argv) or "")


def test_good_input_passes(tmp_path):
    argv = ["-m", "framework=pytorch", "model=resnet50,bert_base", "precision=fp32,amp",
            "preset=smoke", "gpus_per_node=1,2", "model.size=tiny", f"output_root={tmp_path}",
            "hydra.sweep.dir=x", "batch_size=8,max"]
    assert precheck.check(argv) is None


def test_valid_names_come_from_conf():
    groups = precheck.groups()
    assert "pytorch" in groups["framework"] and {"resnet50", "bert_base"} <= set(groups["model"])
