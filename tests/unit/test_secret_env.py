"""A site's secrets in cluster.env on the launchers' side: written masked everywhere (point.json,
the pickled drivers, step.json, the dry run), refused in an argument, and carried to the ranks
by process environments only (launchers/backends/secret_env.py)."""
import os
import pickle

import pytest
from hydra import compose, initialize_config_dir

from contract import secrets
from launchers import sweepdir
from launchers.backends import local, secret_env
from launchers.backends.slurm import arrays, job, preview, srun
from launchers.backends.slurm.launcher import HealthDriver, SearchDriver
from launchers.backends.worker import WorkerUnavailable
from launchers.plan import points
from launchers.suite import ROOT, ConfigError
from tests import secret_search
from tests.secret_search import ENV, HF_TOKEN, LICENSE


def make(*overrides, where="/sweep"):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["preset=smoke", "cluster=localtest", *overrides])
    return points.make_point(cfg, where, 0)


SECRET = secret_search.overrides("postgresql+psycopg://bench:{password}@db/dlbench")


def test_the_point_as_written_holds_its_secrets_masked_and_the_submission_exports_them(tmp_path):
    point = make(*SECRET, "+cluster.env.NCCL_DEBUG=WARN", where=str(tmp_path))
    assert secret_env.hidden(point) == ENV        # ACME_LICENSE by the site's own key
    sweepdir.write_point(point)
    written = sweepdir.read_point(point.dir)
    assert written == sweepdir.as_written(point)
    assert dict(written.cluster.env) == {**{k: secrets.MASK for k in ENV}, "NCCL_DEBUG": "WARN"}
    assert written.cluster.store.url == "postgresql+psycopg://bench:***@db/dlbench"
    assert secret_search.found([tmp_path]) == []
    with secret_env.exported([point]):
        assert {k: os.environ[k] for k in ENV} == ENV
        assert secret_env.values(written) == ENV
    assert all(os.environ.get(k) != v for k, v in ENV.items())   # given back


def test_a_secret_that_did_not_reach_the_allocation_fails_the_repeat_by_name():
    written = sweepdir.as_written(make(*SECRET))
    with pytest.raises(WorkerUnavailable, match=r"cluster\.env\.HF_TOKEN is a secret") as exc:
        secret_env.values(written, environ={})
    assert HF_TOKEN not in str(exc.value)


def test_one_sbatch_cannot_carry_two_values_of_one_secret_so_they_go_apart():
    a, b = make("+cluster.env.HF_TOKEN=hf_aaaaaaaa"), make("+cluster.env.HF_TOKEN=hf_bbbbbbbb")
    with pytest.raises(ConfigError, match="cluster.env.HF_TOKEN is a secret with different values"):
        with secret_env.exported([a, b]):
            pass
    assert arrays.shapes([a, b, a]) == [[a, a], [b]]


def test_ranks_get_the_values_through_their_environment_and_the_records_show_them_masked():
    written = sweepdir.as_written(make(*SECRET, "nodes=2"))
    base = {"PATH": "/usr/bin", **ENV}          # the driver's environment, from sbatch's export
    env = srun.step_env(written, "node1", 29500, base=base)
    assert {k: env[k] for k in ENV} == ENV
    shown = srun.step_env_additions(written, "node1", 29500)   # step.json's "env", the dry run's
    assert {k: shown[k] for k in ENV} == {k: secrets.MASK for k in ENV}
    rank = local.rank_env(written, 1, 29500, base=base)
    assert {k: rank[k] for k in ENV} == ENV and rank["RANK"] == "1"
    argv = srun.repeat_argv(written, "/s/spec.json", "/s", "py", 10)
    assert secret_search.found(texts=[" ".join(argv)]) == []   # nothing in ps or sacct


def test_the_pickled_drivers_dry_run_and_sbatch_script_hold_no_secret():
    point = make(*SECRET, "nodes=2", "launcher=slurm")
    pickles = [pickle.dumps(SearchDriver(sweepdir.as_written(point))),
               pickle.dumps(HealthDriver(sweepdir.as_written(point)))]
    texts = [preview.point_text(point), job.sbatch_script(point)]
    assert secret_search.found(texts=texts + [p.decode("latin-1") for p in pickles]) == []
    assert f"HF_TOKEN={secrets.MASK}" in texts[0]


@pytest.mark.parametrize("override,setting", [
    ("cluster.srun_args=['--export=ALL,HF_TOKEN=hf_abcdefgh']", "cluster.srun_args.0"),
    ("+cluster.sbatch_args={comment:'https://u:pw-123456@h/x'}", "cluster.sbatch_args.comment"),
    ("+cluster.sbatch_args={license:abc}", "cluster.sbatch_args.license"),     # the site's key
    ("framework.container=docker://me:pw-1234567@registry/img", "framework.container"),
])
def test_a_secret_in_an_argument_is_refused_naming_the_setting_not_the_value(override, setting):
    with pytest.raises(ConfigError) as exc:
        make(override, "cluster.secret_keys=[license]")
    assert str(exc.value).startswith(f"{setting} holds a secret, which as an argument of sbatch")
    assert not any(v in str(exc.value) for v in ("hf_abcdefgh", "pw-123456", "abc}", "pw-1234567"))


def test_the_sites_own_keys_are_a_checked_list():
    point = make("cluster.secret_keys=[license,pin]", f"+cluster.env.ACME_LICENSE={LICENSE}")
    assert point.cluster.secret_keys == ("license", "pin")
    assert secret_env.hidden(point) == {"ACME_LICENSE": LICENSE}
    with pytest.raises(ConfigError, match="cluster.secret_keys must be a list"):
        make("cluster.secret_keys=license")


def test_the_tests_rank_check_runs_python_only_where_every_value_arrived(tmp_path):
    import subprocess
    import sys
    check = secret_search.rank_check(tmp_path, sys.executable)
    assert secret_search.found([check]) == []          # their sha256 only
    ok = subprocess.run([check, "-c", "print('ran')"], env=ENV, capture_output=True, text=True)
    assert (ok.returncode, ok.stdout) == (0, "ran\n")
    short = subprocess.run([check, "-c", "print('ran')"], env={**ENV, "HF_TOKEN": "***"},
                           capture_output=True, text=True)
    assert (short.returncode, short.stdout, short.stderr) == (3, "", "HF_TOKEN did not reach the rank\n")


URL = "postgresql+psycopg://bench:S3cret-store-PW@db/dlbench"


@pytest.mark.parametrize("args", [
    ["--cfg", "job", f"cluster.store.url={URL}"],        # Hydra prints the composed config
    ["cluster=localtest", f"cluster.store.url={URL}"],   # Hydra refuses it (no +) and echoes it
    ["-m", "gpus_per_node=1,3", "cluster=localtest", "launcher=slurm",  # the suite's own line
     f"++cluster.store.url={URL}"],                                    # names the overrides
])
def test_no_message_of_launch_shows_a_secret_it_was_given(args, tmp_path):
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "launch", *args, f"+cluster.env.HF_TOKEN={HF_TOKEN}",
                          f"output_root={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 or args[0] == "--cfg"
    assert ":***@db" in res.stdout + res.stderr   # shown masked (Hydra escapes the colon: bench\\:)
    assert secret_search.found([tmp_path], texts=[res.stdout, res.stderr]) == []
