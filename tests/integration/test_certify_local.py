"""`python -m launch certify` on a machine with no Slurm controller (issue 52: a laptop met
`certify.baseline=published matches no item`, then sbatch's raw errors, then matplotlib's
warning): the smoke suite at its smallest (its system, health gate and common settings, its
all_reduce item), no baseline given, launcher=auto. A real point on the local launcher, the
real report and archive; some 20 s here."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from certify import suite as suites
from contract import paths
from launchers.suite import ROOT

pytestmark = pytest.mark.e2e


# the command in a process of its own (its real stderr: the plots' process's warnings reach it
# there, as a user's; pytest would record them), reading the suite from the folder given
COMMAND = ("import sys; from certify import suite; suite.SUITES = sys.argv[1]; import launch; "
           "sys.exit(launch.main(sys.argv[2:]))")


@pytest.fixture
def suites_here(tmp_path):
    """conf/certify's smoke at its smallest, in a folder of its own."""
    with open(os.path.join(suites.SUITES, "smoke.yaml")) as f:
        smoke = yaml.safe_load(f)
    assert smoke["system"]["launcher"] == "auto"   # the shipped suite, as a laptop reads it
    # one item: its all_reduce (of one rank, 0 GB/s, it met matplotlib's log scale; two here)
    smoke["items"] = [i for i in smoke["items"] if i["name"] == "all_reduce"]
    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "smoke.yaml").write_text(yaml.safe_dump(smoke))
    return folder


def test_the_first_certification_here_records_on_the_local_launcher(suites_here, tmp_path):
    env = dict(os.environ, DLBENCH_STORE=str(tmp_path / "store.sqlite"), OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", COMMAND, str(suites_here), "certify", "smoke",
                          f"certify.dir={tmp_path / 'first'}"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    out, err = res.stdout, res.stderr
    assert res.returncode == 0, out[-3000:] + err[-3000:]
    lines = out.splitlines()
    assert lines[0].startswith("launcher=auto: local (")   # no controller answers here
    assert lines[1].startswith("certify: suite smoke, 1 points of 1 items on 1x2 (launcher local, "
                               "cluster local); baseline none (no published row matches and no "
                               "earlier certification of suite smoke on this system: this one "
                               "records its baseline)")
    assert "## Certification smoke: RECORDED (exit 0)" in out
    assert "sbatch" not in err and "Warning" not in err, err   # no raw Slurm, no matplotlib warning
    with open(tmp_path / "first" / paths.VERDICT_FILE) as f:
        verdict = json.load(f)
    assert verdict["system"] == {"nodes": 1, "gpus_per_node": 2, "launcher": "local", "cluster": "local"}
    assert [(i["item"], i["verdict"], i["status"]) for i in verdict["items"]] == [
        ("all_reduce", "MEASURED", "ok")]
