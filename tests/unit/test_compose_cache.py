"""The composition cache of the suite's Hydra launcher (hydra_plugins/dlbench_launcher/
compose.py): each job's config equals the one Hydra's basic launcher composes for it, with
one composition per distinct combination of group choices."""
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf, open_dict, read_write

from hydra_plugins.dlbench_launcher.compose import Compositions
from launchers.suite import ROOT

JOBS = [
    ["preset=smoke", "seed=0"],
    ["preset=smoke", "seed=1"],
    ["seed=2", "preset=smoke"],                                   # the same groups, other order
    ["preset=smoke", "model=bert_base", "precision=amp", "batch_size=3", "nodes=2"],
    ["launcher=slurm", "cluster=localtest", "launcher.time_min=3", "model.size=tiny",
     "+cluster.env.NCCL_DEBUG=INFO", "+cluster.sbatch_args={hold:true}"],
    ["framework=jax", "compile=false", "~rendezvous_timeout_s", "++seed=5"],
    ["output_root=/tmp/elsewhere", "preset=smoke"],
]


@pytest.fixture(scope="module")
def hydra_loader():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        master = compose("config", return_hydra_config=True)
        str(master.hydra.sweep.dir)  # as in a real sweep: ${now:} resolved, and cached, first
        yield GlobalHydra.instance().config_loader(), master


def reference(loader, master, overrides):
    """The job as Hydra's basic launcher composes it: (config without hydra, sweep dir)."""
    cfg = loader.load_sweep_config(master, list(overrides))
    sweep_dir = str(cfg.hydra.sweep.dir)
    with read_write(cfg), open_dict(cfg):
        del cfg["hydra"]
    return OmegaConf.to_container(cfg, resolve=True), sweep_dir


def test_every_job_equals_hydras_own_composition(hydra_loader):
    loader, master = hydra_loader
    comps = Compositions(loader, master)
    for overrides in JOBS:
        cfg, sweep_dir = comps.job(overrides)
        assert "hydra" not in cfg and OmegaConf.is_struct(cfg)
        assert (OmegaConf.to_container(cfg, resolve=True), sweep_dir) == \
            reference(loader, master, overrides), overrides
    # one composition per distinct combination of group choices: 7 jobs, 4 combinations
    assert comps.composed == len(comps.bases) == 4
    assert set(comps.bases) == {("preset=smoke",), ("preset=smoke", "model=bert_base", "precision=amp"),
                                ("launcher=slurm", "cluster=localtest"), ("framework=jax",)}


def test_jobs_do_not_share_state(hydra_loader):
    comps = Compositions(*hydra_loader)
    first, _ = comps.job(["preset=smoke", "seed=0", "+cluster.env.A=1"])
    second, _ = comps.job(["preset=smoke", "seed=1"])
    assert (first.seed, second.seed) == (0, 1)
    assert "A" in first.cluster.env and "A" not in second.cluster.env
    assert comps.composed == 1


def test_the_sweep_dir_follows_the_jobs_own_keys(hydra_loader):
    loader, master = hydra_loader
    comps = Compositions(loader, master)
    _, here = comps.job(["seed=0"])
    _, there = comps.job(["output_root=/tmp/elsewhere"])
    stamp = str(master.hydra.sweep.dir).split("/")[-1]
    assert here == f"outputs/{stamp}" and there == f"/tmp/elsewhere/{stamp}"


def test_group_and_value_overrides_are_told_apart_by_hydras_rule(hydra_loader):
    comps = Compositions(*hydra_loader)
    groups, values = comps.split(["model=bert_base", "model.size=tiny", "seed=3",
                                  "+cluster.env.X=1", "cluster=localtest"])
    assert groups == ("model=bert_base", "cluster=localtest")
    assert [v.input_line for v in values] == ["model.size=tiny", "seed=3", "+cluster.env.X=1"]


def test_a_bad_override_fails_as_hydra_fails(hydra_loader):
    comps = Compositions(*hydra_loader)
    with pytest.raises(ConfigCompositionException, match="Could not override 'no_such_key'"):
        comps.job(["no_such_key=1"])
