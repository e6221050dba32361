"""The line a GPU-sized point says before it trains on a CPU (launchers/plan/cpu_estimate.py;
issue 52, item 4: the defaults ran full-size ResNet-50 on a CPU without a word)."""
from types import SimpleNamespace

from launchers.plan import cpu_estimate


def point(size="full", launcher="local", device="auto", **kw):
    fields = dict(model={"name": "resnet50", "size": size, "layers": [3, 4, 6, 3], "width": 64,
                         "image_size": 224, "num_classes": 1000},
                  launcher=SimpleNamespace(name=launcher), bench="train", device=device,
                  warmup_steps=20, measure_steps=100, repeats=7, batch_size=8, world_size=1,
                  parallel=None)
    return SimpleNamespace(**{**fields, **kw})


def test_the_rule_by_hand():
    # 24.5e9 FLOPs x 8 samples x 120 steps x 7 repeats = 1.6464e14 FLOPs; 2 cores x 10 GFLOP/s:
    # 8232 s
    assert cpu_estimate.TRAIN_GFLOPS_PER_CORE == 10.0
    assert abs(cpu_estimate.seconds(24.5e9, 8, 120, 7, 2) - 8232.0) < 1e-6


def test_the_defaults_on_a_cpu_say_so_in_one_line():
    # ResNet-50 at 224: 4,089,184,256 multiply-adds forward, x 2 x 3 = 24.54 GFLOPs an image
    # trained; x 8 x 120 x 7 / (2 cores x 10 GFLOP/s) = 8240 s: 137 minutes
    line = cpu_estimate.warning(point(), on_cpu=True, cores=2)
    assert line == ("model.size=full on cpu: resnet50 at batch 8, 7 repeats x 120 steps: "
                    "about 137 minutes; preset=smoke for a quick look")
    assert "\n" not in line


def test_no_line_for_a_cpu_size_a_gpu_or_slurm():
    assert cpu_estimate.warning(point(size="tiny"), on_cpu=True, cores=2) is None
    assert cpu_estimate.warning(point(), on_cpu=False, cores=2) is None
    assert cpu_estimate.warning(point(launcher="slurm"), on_cpu=True, cores=2) is None
    assert cpu_estimate.warning(point(bench="comm"), on_cpu=True, cores=2) is None
