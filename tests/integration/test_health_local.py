"""Cluster health on this machine with the local launcher (docs/health.md): `launch health`
runs the node checks that apply here and says why the others are skipped; preflight=true
runs them before a point's repeats, and a sick machine (a site check that fails: a real
script, a real non-zero exit) ends the point `unhealthy` without a training run."""
import json
import os
import stat

import pytest

from healthchecks import nodechecks
from contract import paths
from tests import launching


def launch(*args, timeout=240):
    return launching.launch(*args, timeout=timeout)  # ranks of one thread: 2 shared cores


def failing_check(tmp_path):
    path = tmp_path / "check-ecc.sh"
    path.write_text("#!/bin/sh\necho 'GPU 0: 7 uncorrectable ECC errors (site check)'\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def verdict_of(out_root):
    (run,) = [d for d in os.listdir(out_root) if d.startswith(paths.HEALTH_RUN_PREFIX)]
    with open(os.path.join(out_root, run, paths.HEALTH_FILE)) as f:
        return json.load(f), os.path.join(out_root, run)


@pytest.fixture(scope="module")
def here(tmp_path_factory):
    """`launch health` on this machine, 2 ranks, with a site's matmul figure that any CPU
    reaches: (its result, its output root), shared by two tests."""
    out = tmp_path_factory.mktemp("here")
    return launch("health", "launcher=local", "gpus_per_node=2", "health.expect.matmul_tflops=0.0001",
                  f"output_root={out}"), out


def test_launch_health_here_says_what_it_checked_and_why_it_skipped_the_rest(here):
    r, out = here
    assert r.returncode == 0, r.stdout + r.stderr
    verdict, folder = verdict_of(out)
    (node,) = verdict["nodes"]
    assert verdict["ok"] and node["status"] == "ok"
    assert set(node["checks"]) == set(nodechecks.CHECKS)
    for name, check in node["checks"].items():  # nothing passes silently
        assert check["status"] in ("ok", "skipped") and check["reason"], (name, check)
    assert node["checks"]["links"]["reason"] == "one node: no link between nodes"
    assert node["checks"]["memory"]["status"] == node["checks"]["matmul"]["status"] == "ok"
    assert sorted(f for f in os.listdir(folder) if f.endswith(".json")) == \
        [paths.HEALTH_FILE, paths.rank_record_name(0), paths.rank_record_name(1), paths.SPEC_FILE]
    assert "links skipped on every node: one node: no link between nodes" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("health: ok in ")


def test_a_failing_site_check_makes_the_node_sick_and_the_exit_1(tmp_path):
    script = failing_check(tmp_path)
    r = launch("health", "launcher=local", f"output_root={tmp_path / 'out'}",
               f"health.site_checks=[{script}]")
    assert r.returncode == 1, r.stdout + r.stderr
    verdict, _ = verdict_of(tmp_path / "out")
    (reasons,) = verdict["sick"].values()
    assert reasons == [f"site: {script} exited 1: GPU 0: 7 uncorrectable ECC errors (site check)"]
    assert "sick" in r.stdout and "health: SICK in" in r.stdout


def test_the_sites_figures_judge_this_one_machine(tmp_path, here):
    """One node has nothing to compare with; the site's figures do: a multiply this CPU
    cannot reach makes it sick, one it reaches passes (`here`'s run)."""
    r = launch("health", "launcher=local", f"output_root={tmp_path / 'high'}", "health.expect.matmul_tflops=1000")
    assert r.returncode == 1, r.stdout + r.stderr
    verdict, _ = verdict_of(tmp_path / "high")
    (reasons,) = verdict["sick"].values()
    assert len(reasons) == 1 and reasons[0].startswith("matmul: rank 0: ") and reasons[0].endswith(
        "below the site's 1000 TFLOP/s (health.expect.matmul_tflops)")
    r, out = here
    assert r.returncode == 0, r.stdout + r.stderr
    assert verdict_of(out)[0]["ok"]


def sweep(tmp_path, *overrides, code=0):
    """The sweep's (result, folder, point folder, preflight record); `code`: its exit status
    (docs/statuses.md: 1 where its point did not pass)."""
    sdir = tmp_path / "sweep"
    r = launch("-m", "preset=smoke", "repeats=1", "preflight=true", "launcher=local",
               f"hydra.sweep.dir={sdir}", *overrides)
    assert r.returncode == code, r.stdout + r.stderr
    (pdir,) = (sdir / paths.POINTS_DIR).iterdir()
    return r, sdir, pdir, json.loads((pdir / paths.PREFLIGHT_FILE).read_text())


def test_preflight_here_checks_then_runs_the_repeats(tmp_path):
    r, sdir, pdir, pre = sweep(tmp_path)
    assert pre["outcome"] == "ok" and [a["ok"] for a in pre["attempts"]] == [True]
    assert (pdir / pre["attempts"][0]["dir"] / paths.HEALTH_FILE).exists()
    assert json.loads((pdir / paths.repeat_name(0) / paths.RUN_FILE).read_text())["status"] == "ok"
    assert "ecc, rows, throttle, clocks, power, persistence skipped on every node: no GPU" in r.stdout


def test_a_sick_machine_ends_the_point_unhealthy_without_a_training_run(tmp_path):
    script = failing_check(tmp_path)
    _, sdir, pdir, pre = sweep(tmp_path, f"health.site_checks=[{script}]", code=1)
    assert pre["outcome"] == "unhealthy" and "the local launcher has no other node" in pre["error"]
    assert not (pdir / paths.repeat_name(0)).exists()
    status = launch("status", str(sdir))
    line = next(l for l in status.stdout.splitlines() if l.startswith(pdir.name))
    assert line.split()[1] == "UNHEALTHY" and "7 uncorrectable ECC errors" in line
