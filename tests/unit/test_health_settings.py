"""Bad `health.*` input is refused in one line before anything runs, by `launch health` and by
a sweep alike (contract/point.py's declarations and launchers/health/settings.py, through
launchers/plan/checks.py)."""
import os
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir

import launch
from healthchecks import nodechecks
from contract.point import Expect
from launchers.plan import checks, points
from launchers.suite import ROOT

CONF = str(ROOT / "conf")
BAD = [
    ("health.min_fraction=0", "health.min_fraction must be a number in (0, 1], got 0"),
    ("health.min_fraction=1.2", "health.min_fraction must be a number in (0, 1], got 1.2"),
    ("health.min_fraction=half", "health.min_fraction must be a number in (0, 1], got 'half'"),
    ("health.retries=-1", "health.retries must be an integer >= 0, got -1"),
    ("health.retries=1.5", "health.retries must be an integer >= 0, got 1.5"),
    ("health.checks=[devices,ecc,smart]", "unknown health check 'smart' in health.checks (valid: all, "
                                          + ", ".join(nodechecks.CHECKS) + ")"),
    ("health.checks=links2", "unknown health check 'links2'"),
    ("health.link_mb=0", "health.link_mb must be a number > 0, got 0"),
    ("health.link_iters=0", "health.link_iters must be an integer >= 1, got 0"),
    ("health.site_checks=/bin/true", "health.site_checks must be a list of script paths, got '/bin/true'"),
    ("preflight=maybe", "preflight must be true or false, got 'maybe'"),
    ("health.link_cap_s=0", "health.link_cap_s must be a number > 0, got 0"),
    ("health.expect.link_gbytes_s=-1", "health.expect.link_gbytes_s must be a number > 0, got -1"),
    ("health.expect.matmul_tflops=fast", "health.expect.matmul_tflops must be a number > 0, got 'fast'"),
    ("health.expect.ib_rate_gbits=true", "health.expect.ib_rate_gbits must be a number > 0, got True"),
    ("health.expect.gpus_per_node=1.5", "health.expect.gpus_per_node must be an integer >= 1, got 1.5"),
    ("health.expect=8", "health.expect must be a mapping of link_gbytes_s, matmul_tflops, ib_rate_gbits, "
                        "gpus_per_node, nccl_transport, got 8"),
    ("+health.expect.flops=1", "unknown health.expect key 'flops' (valid: link_gbytes_s, matmul_tflops, "
                               "ib_rate_gbits, gpus_per_node, nccl_transport)"),
]


def cfg_of(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base=None):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize("override,message", BAD)
def test_a_point_with_bad_health_settings_is_refused(override, message):
    with pytest.raises(points.ConfigError) as err:
        checks.validate(cfg_of(override))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_checks_resolve_to_names(tmp_path):
    assert list(points.make_point(cfg_of(), tmp_path, 0).health.checks) == list(nodechecks.CHECKS)
    point = points.make_point(cfg_of("health.checks=[memory,links]"), tmp_path, 0)
    assert list(point.health.checks) == ["memory", "links"] and point.preflight is False


def test_the_sites_figures_are_typed_and_null_by_default(tmp_path):
    assert points.make_point(cfg_of(), tmp_path, 0).health.expect == Expect()
    point = points.make_point(cfg_of("health.expect.link_gbytes_s=20", "health.expect.gpus_per_node=8"),
                              tmp_path, 0)
    assert point.health.expect == Expect(link_gbytes_s=20, gpus_per_node=8)
    assert point.health.link_cap_s == 2


def test_a_site_sets_its_figures_once_in_its_file(tmp_path):
    """A site file in Hydra's global form (docs/health.md), kept outside the checkout."""
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "mysite.yaml").write_text(
        "# @package _global_\ncluster:\n  name: mysite\n  partition: gpu\n"
        "health:\n  expect:\n    link_gbytes_s: 20\n    gpus_per_node: 8\n")
    site = ["cluster=mysite", f"hydra.searchpath=[file://{tmp_path}]"]
    point = points.make_point(cfg_of(*site), tmp_path / "s", 0)
    assert (point.cluster.name, point.cluster.partition) == ("mysite", "gpu")
    assert point.health.expect == Expect(link_gbytes_s=20, gpus_per_node=8)
    assert points.make_point(cfg_of(*site, "health.expect.link_gbytes_s=25"), tmp_path / "s", 0
                             ).health.expect.link_gbytes_s == 25  # an override still wins


@pytest.mark.parametrize("override,message", BAD[:4] + BAD[5:6] + BAD[-7:-1] + [
    ("health.expect.flops=1", "unknown key 'health.expect.flops' (valid in health.expect: link_gbytes_s, "
                              "matmul_tflops, ib_rate_gbits, gpus_per_node, nccl_transport)")])
def test_launch_health_refuses_in_one_line_and_exit_2(override, message, capsys, tmp_path):
    code = launch.main(["health", override, f"output_root={tmp_path}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: {message}"]
    assert not any(os.scandir(tmp_path))  # nothing ran, nothing written


def test_a_sweep_with_bad_health_settings_runs_nothing(tmp_path):
    r = subprocess.run([sys.executable, "-m", "launch", "-m", "preset=smoke", "preflight=true,false",
                        "health.retries=-2", f"hydra.sweep.dir={tmp_path / 's'}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith(
        "error: health.retries must be an integer >= 0, got -2 (sweep point 0")
    assert not (tmp_path / "s" / "points").exists()
