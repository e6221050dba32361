"""The search's ledger is its memory (launchers/driver/search.py, ledger.py): run again, as after a requeue on
Slurm, it tries no value twice; a try cut short resumes at its first unrecorded repeat;
max_tries bounds every search (it sizes a Slurm search's allocation); a search on Slurm is
refused only for a key that changes the allocation (launchers/backends/slurm/launcher.py)."""
import json
import os
from types import SimpleNamespace

import pytest

from contract import spec as specs
from contract import paths, records
from contract.frozen import Settings
from launchers.backends.slurm.launcher import SlurmLauncher
from launchers.driver import ledger, search
from launchers.plan import points
from tests.unit.test_points import cfg_of

FITS = 40  # the largest batch the fake worker below "trains"


def base_point(tmp_path, **search_settings):
    cfg = cfg_of("preset=smoke", "repeats=2", "memory_limit_mb=150")
    point = points.make_point(cfg, tmp_path, 0)
    return point.replace(search=Settings({"key": "batch_size", "start": 8, "max": 1024,
                                          "tolerance": 0.25, **search_settings}))


def launcher(start):
    """A launcher object whose repeats start with `start(point, spec_path, rdir)`."""
    return SimpleNamespace(start_repeat=start)


def fake_start(tried):
    """A launcher's start that records, instead of training, ok up to FITS and oom past it."""
    def start(point, spec_path, rdir):
        tried.append((point.batch_size, specs.read(spec_path).repeat))
        ok = point.batch_size <= FITS
        records.write_json_atomic(os.path.join(rdir, paths.rank_record_name(0)), {
            "status": "ok" if ok else "oom", "error": None if ok else "out of memory"})
        return {0: {"exit_code": 0 if ok else 1, "signal": None, "node": None, "stopped": False}}, None
    return launcher(start)


def test_a_second_run_takes_every_tried_value_from_the_ledger(tmp_path):
    base, tried = base_point(tmp_path), []
    first = search.run(base, fake_start(tried), log=lambda m: None)
    assert first["largest_ok"] <= FITS < first["smallest_oom"] and first["done"]
    values = [t["value"] for t in first["tries"]]
    assert len(values) == len(set(values)) and sorted(v for v, _ in tried) == sorted(values * 2)
    again, said = [], []
    second = search.run(base, fake_start(again), log=said.append)
    assert again == []  # nothing tried twice
    assert [t["value"] for t in second["tries"]] == values
    assert (second["largest_ok"], second["smallest_oom"]) == (first["largest_ok"], first["smallest_oom"])
    assert sum("not tried again" in m for m in said) == len(values)


def test_a_requeued_search_resumes_the_try_it_was_cut_short_in(tmp_path):
    base, tried = base_point(tmp_path), []
    cut = {"at": None}

    def start(point, spec_path, rdir):  # the allocation ends during the third try's 2nd repeat
        if len(tried) == 5:
            cut["at"] = point.batch_size
            raise KeyboardInterrupt  # what leaves the loop as a requeue does: nothing recorded
        return fake_start(tried).start_repeat(point, spec_path, rdir)
    with pytest.raises(KeyboardInterrupt):
        search.run(base, launcher(start), log=lambda m: None)
    kept = json.load(open(ledger.path(base)))
    assert [t["value"] for t in kept["tries"]] == [8, 16] and not kept["done"]
    resumed = []
    done = search.run(base, fake_start(resumed), log=lambda m: None)
    # the values before the cut are not run again; the cut try runs only its missing repeat
    assert resumed[0] == (cut["at"], 1) and all(v not in (8, 16) for v, _ in resumed)
    assert done["done"] and done["largest_ok"] <= FITS < done["smallest_oom"]


def test_another_memory_cap_is_another_search(tmp_path):
    base = base_point(tmp_path)
    search.run(base, fake_start([]), log=lambda m: None)
    assert ledger.read(base) is not None
    assert ledger.read(base.replace(memory_limit_mb=300)) is None  # remembers nothing of it
    assert ledger.read(base.replace(search=base.search.replace(tolerance=0.1))) is not None


def test_begin_writes_the_ledger_a_queued_search_shows(tmp_path):
    base = base_point(tmp_path)
    kept = ledger.begin(base)
    assert kept["tries"] == [] and not kept["done"]
    assert json.load(open(ledger.path(base)))["key"] == "batch_size"


@pytest.mark.parametrize("start,maximum,tolerance", [(8, 1024, 0.25), (1, 2**20, 0.05),
                                                     (1000, 1000 * 2**20, 0.05), (64, 64, 0.5)])
def test_max_tries_bounds_every_search(start, maximum, tolerance):
    bound = search.max_tries({"start": start, "max": maximum, "tolerance": tolerance})
    for fits in sorted({0, 1, start - 1, start, start + 1, maximum, maximum - 1,
                        *[int(start * 1.37 ** k) for k in range(60)]}):
        tries = []

        def attempt(v):
            tries.append(v)
            return "ok" if v <= fits else "oom"
        search.find_largest(attempt, start, maximum, tolerance)
        assert len(tries) <= bound, (fits, tries)


def test_slurm_refuses_only_a_key_that_changes_the_allocation(tmp_path):
    SlurmLauncher().check(base_point(tmp_path))
    with pytest.raises(points.ConfigError, match="changes the allocation"):
        SlurmLauncher().check(base_point(tmp_path, key="gpus_per_node", start=1, max=2))


def test_a_search_on_slurm_is_one_job_sized_for_its_tries(tmp_path, capsys):
    point = points.make_point(cfg_of("launcher=slurm", "cluster=localtest", "preset=smoke",
                                     "launcher.time_min=null", "cluster.max_time_min=100000"),
                              tmp_path, 0)
    point = point.replace(search=Settings({"key": "batch_size", "start": 32, "max": 4096,
                                           "tolerance": 0.5}))
    SlurmLauncher().submit_search(point, dry_run=True)
    out = capsys.readouterr().out
    assert "on Slurm one allocation, each try's repeats srun steps in it" in out
    assert out.count("#SBATCH --requeue") == 1 and "#SBATCH --nodes=1" in out
    tries = search.max_tries(point.search)  # 8 doublings at most, then 2 bisections
    assert tries == 10
    per_repeat_s = point.timeout_s + point.launcher.step_overhead_s
    assert f"#SBATCH --time={-(-(tries * point.repeats * per_repeat_s + 120) // 60)}" in out
    assert not (tmp_path / "points").exists() and not (tmp_path / "searches").exists()
