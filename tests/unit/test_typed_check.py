"""One declaration per field (contract/typed.py `setting`), checked once by contract/values.py's
rule: the typed point's fields say their type, bounds and choices, and `typed.check` holds a
config's values to them in one line each, naming the setting as the config spells it."""
from dataclasses import dataclass
from typing import Optional

import pytest

from contract import typed
from contract.frozen import Settings
from contract.point import Cluster, Health, Point
from contract.typed import setting


@dataclass(frozen=True)
class Inner:
    rate: Optional[float] = setting(None, above=0)
    count: Optional[int] = setting(None, minimum=1)


@dataclass(frozen=True)
class Outer:
    steps: int = setting(1, minimum=0)
    share: float = setting(0.5, above=0, at_most=1)
    on: bool = False
    kind: str = setting("a", choices=("a", "b", "c"))
    dtype: Optional[str] = setting(None, choices=("bf16", "fp16"), key="precision.amp_dtype")
    args: tuple = ()
    env: Settings = Settings()
    inner: Inner = Inner()
    free: str = "anything"


@pytest.mark.parametrize("given,message", [
    ({"steps": -1}, "steps must be an integer >= 0, got -1"),
    ({"steps": True}, "steps must be an integer >= 0, got True"),      # a bool is no integer
    ({"steps": None}, "steps must be an integer >= 0, got None"),      # not Optional
    ({"share": 0}, "share must be a number in (0, 1], got 0"),
    ({"share": "half"}, "share must be a number in (0, 1], got 'half'"),
    ({"on": "yes"}, "on must be true or false, got 'yes'"),
    ({"kind": "d"}, "kind must be a, b or c, got 'd'"),
    ({"dtype": "fp8"}, "precision.amp_dtype must be bf16 or fp16, got 'fp8'"),
    ({"args": "x"}, "args must be a list, got 'x'"),
    ({"env": [1]}, "env must be a mapping, got [1]"),
    ({"inner": 8}, "inner must be a mapping of rate, count, got 8"),
    ({"inner": {"rate": -1}}, "inner.rate must be a number > 0, got -1"),
    ({"inner": {"count": 1.5}}, "inner.count must be an integer >= 1, got 1.5"),
    ({"inner": {"speed": 1}}, "unknown inner key 'speed' (valid: rate, count)"),
    ({"x": 1, "y": 2}, "unknown keys 'x', 'y' (valid: steps, share, on, kind, dtype, args, env, inner, "
                       "free)"),
])
def test_a_value_against_its_declaration_is_one_line(given, message):
    with pytest.raises(ValueError) as err:
        typed.check(Outer, given)
    assert str(err.value) == message


def test_what_the_declarations_allow_passes():
    typed.check(Outer, {"steps": 0, "share": 1, "on": True, "kind": "c", "dtype": None, "args": [],
                        "env": {"A": "1"}, "inner": {"rate": 2, "count": None}, "free": "text"})
    typed.check(Outer, {"args": None, "env": None, "inner": None})  # a list or a mapping: null is empty
    typed.check(Outer, {"inner": Inner(rate=1.0)})                   # made already


def test_the_points_own_defaults_hold_to_its_declarations():
    typed.check(Point, typed.plain(Point(name="p", dir="/p", framework={"name": "pytorch"},
                                         model=Settings())))
    typed.check(Cluster, typed.plain(Cluster()))
    typed.check(Health, typed.plain(Health()))
