"""A sweep's exclusion rules (launchers/plan/exclude.py): which points they match, the one line a
bad rule costs, and a sweep that skips its excluded points with a line each."""
import pytest

from launchers.plan import exclude, points, sweep
from tests.unit.test_points import cfg_of


def _match(rules, *overrides):
    cfg = cfg_of(*overrides)
    return exclude.matching(cfg, exclude.rules(cfg_of(f"exclude={rules}")))


@pytest.mark.parametrize("rules,overrides,matches", [
    ("[{parallel.tp:8,nodes:1}]", ["parallel.tp=8"], True),
    ("[{parallel.tp:8,nodes:1}]", ["parallel.tp=8", "nodes=2"], False),
    ("[{parallel.tp:[4,8]}]", ["parallel.tp=4"], True),
    ("[{parallel.tp:[4,8]}]", ["parallel.tp=2"], False),
    ("[{parallel.fsdp:true}]", ["parallel.fsdp=true"], True),
    ("[{nodes:true}]", ["nodes=1"], False),                  # true is not 1
    ("[{model.name:gpt}]", ["model=gpt"], True),
    ('[{where:"parallel.tp * parallel.pp > nodes * gpus_per_node"}]', ["parallel.tp=2"], True),
    ('[{where:"parallel.tp * parallel.pp > nodes * gpus_per_node"}]', ["parallel.tp=2", "gpus_per_node=2"], False),
    ('[{where:"framework.name in [\'jax\', \'mxnet\'] and not parallel.fsdp"}]', ["framework=jax"], True),
    ('[{where:"batch_size % 3 == 2 or precision.name == \'amp\'"}]', ["batch_size=8"], True),
    ('[{where:"-batch_size < -10"}]', ["batch_size=8"], False),
])
def test_which_points_a_rule_matches(rules, overrides, matches):
    assert (_match(rules, *overrides) is not None) == matches


@pytest.mark.parametrize("rules,line", [
    ("[{nope.x:1}]", "exclude rule nope.x=1: no key 'nope.x' in the config"),
    ('[{where:"__import__(1)"}]', "exclude rule where '__import__(1)': Call is not allowed"),
    ('[{where:"nodes +"}]', "exclude rule where 'nodes +': not an expression"),
    ('[{where:"nodes > 1",nodes:2}]', "exclude rule"),
    ('[{where:"nodes / 0"}]', "exclude rule where 'nodes / 0': division by zero"),
])
def test_a_bad_rule_costs_one_line(rules, line):
    with pytest.raises(exclude.RuleError) as exc:
        _match(rules, "nodes=1")
    assert str(exc.value).startswith(line) and "\n" not in str(exc.value)


def _jobs(rule, values):
    return [sweep.Job(cfg_of("model=gpt", "model.size=tiny", "launcher=local", f"parallel.tp={tp}",
                             "gpus_per_node=2", f"exclude={rule}"), "/tmp/dlbench-exclude", n,
                      [f"parallel.tp={tp}"]) for n, tp in enumerate(values)]


def test_a_sweep_skips_what_a_rule_excludes_and_says_so(capsys):
    made = sweep.make_points(_jobs('[{where:"parallel.tp > gpus_per_node"}]', [1, 2, 4]))
    assert [p.parallel.tp for p, _ in made] == [1, 2]
    out = capsys.readouterr().out
    assert "skipped sweep point 2 (parallel.tp=4): excluded by where parallel.tp > gpus_per_node" in out


def test_without_a_rule_the_sweep_is_refused_whole():
    with pytest.raises(points.ConfigError, match="1 of 3 points refused, none was run"):
        sweep.make_points(_jobs("[]", [1, 2, 4]))
    with pytest.raises(points.ConfigError, match="every point of the sweep is excluded"):
        sweep.make_points(_jobs("[{model.name:gpt}]", [1, 2]))
