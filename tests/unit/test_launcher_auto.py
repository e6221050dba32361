"""launcher=auto, the default, without a Slurm cluster: the local launcher, said in one
line (with the cluster up, tests/integration/test_slurm_submit_scale.py sees it choose Slurm).
Real `python -m launch` runs, dry runs: nothing trains."""
import os
import shutil
import subprocess
import sys

from launchers.suite import ROOT

NOWHERE = "/nonexistent/dlbench/slurm.conf"


def launch(*args, **env):
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run([sys.executable, "-m", "launch", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**base, **env})


def test_no_srun_on_path_runs_locally(tmp_path):
    (tmp_path / "bin").mkdir()
    res = launch("preset=smoke", "dry_run=true", f"hydra.run.dir={tmp_path}/run",
                 PATH=str(tmp_path / "bin"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "launcher=auto: local (no srun on PATH)"
    assert "1 local rank(s) x 2 repeat(s)" in lines[1]


def test_a_slurm_conf_that_names_no_file_runs_locally_at_once(tmp_path):
    res = launch("-m", "seed=0,1", "preset=smoke", "dry_run=true", f"hydra.sweep.dir={tmp_path}",
                 SLURM_CONF=NOWHERE)
    assert res.returncode == 0, res.stderr
    why = f"SLURM_CONF={NOWHERE} is not a file" if shutil.which("srun") and shutil.which("sbatch") \
        else "no s"  # no srun (or sbatch) on this machine's PATH: said first
    assert res.stdout.startswith(f"launcher=auto: local ({why}")
    assert res.stdout.count("launcher=auto") == 1  # once per sweep, not per point
    assert res.stdout.count("local rank(s)") == 2


def test_the_point_records_the_launcher_that_ran_it_and_why(tmp_path):
    from hydra import compose, initialize_config_dir
    from launchers import auto
    from launchers.plan import points
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["preset=smoke"])
    assert cfg.launcher.name == "auto" and cfg.launcher.max_requeues == 3  # Slurm's settings too
    point = points.make_point(cfg, tmp_path, 0)
    assert (point.launcher.name, point.launcher.auto) == auto.choose()
    assert point.config.launcher.name == "auto"  # as composed
