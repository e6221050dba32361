"""A site's own config folder, outside the checkout, as Hydra users keep one: found through
`--config-dir` and `hydra.searchpath` by the installed `dlbench` command and by
`python -m launch`, run from another working directory."""
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.suite import ROOT

DLBENCH = Path(sys.executable).parent / "dlbench"


@pytest.fixture
def site(tmp_path):
    """SITE/cluster/mysite.yaml: the example site with a partition of its own."""
    folder = tmp_path / "site" / "cluster"
    folder.mkdir(parents=True)
    text = (ROOT / "conf" / "cluster" / "example_site.yaml").read_text()
    (folder / "mysite.yaml").write_text(text.replace("partition: gpu", "partition: site-own-gpus"))
    return folder.parent


def run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


COMMON = ["cluster=mysite", "launcher=slurm", "dry_run=true", "preset=smoke"]


def test_installed_command_finds_a_config_dir_from_elsewhere(site, tmp_path):
    if not DLBENCH.exists():
        pytest.skip("dlbench is not installed in this environment (`make venv` installs it)")
    res = run([str(DLBENCH), "--config-dir", str(site), *COMMON, f"output_root={tmp_path / 'out'}"],
              cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "#SBATCH --partition=site-own-gpus" in res.stdout


def test_hydra_searchpath_and_the_same_error_for_an_unknown_name(site, tmp_path):
    res = run([sys.executable, "-m", "launch", f"hydra.searchpath=[file://{site}]", *COMMON,
               f"output_root={tmp_path / 'out'}"], cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "#SBATCH --partition=site-own-gpus" in res.stdout
    res = run([sys.executable, "-m", "launch", *COMMON], cwd=ROOT)
    assert res.returncode == 2
    assert res.stderr.strip() == ("error: unknown cluster 'mysite' (valid: example_site, local, "
                                  "localtest, localtest_charliecloud)")
    res = run([sys.executable, "-m", "launch", "--config-dir", str(site), "cluster=othersite"], cwd=ROOT)
    assert res.returncode == 2 and res.stderr.strip() == (
        "error: unknown cluster 'othersite' (valid: example_site, local, localtest, localtest_charliecloud, "
        "mysite)")
