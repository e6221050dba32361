"""The one rule for a setting's type: an integer is an int and not a bool, a number is an
int or a float and not a bool (JSON and YAML's `true` is a Python bool, and bool is an int).

Each check returns the value or raises `error` (ValueError by default; a caller passes its
own, e.g. launchers.suite.ConfigError) with one line that names the setting and what it got.
The typed point's fields are checked by these rules, each by its declaration (contract/typed.py).
Standard library only: workers use it too.
"""
import math
from collections.abc import Sequence
from typing import Any, Callable, TypeGuard, TypeVar

T = TypeVar("T")


def is_integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or a float, finite, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(value: Any, name: str, minimum: int | None = 1, error: type[Exception] = ValueError) -> int:
    """An integer >= minimum (any integer where minimum is None)."""
    if not is_integer(value) or (minimum is not None and value < minimum):
        want = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise error(f"{name} must be {want}, got {value!r}")
    return value


def number(value: Any, name: str, above: float | None = None, at_most: float | None = None,
           error: type[Exception] = ValueError) -> float:
    """A number > above (when given) and <= at_most (when given)."""
    if not is_number(value) or (above is not None and value <= above) \
            or (at_most is not None and value > at_most):
        if above is not None and at_most is not None:
            want = f"a number in ({above:g}, {at_most:g}]"
        elif above is not None:
            want = f"a number > {above:g}"
        else:
            want = "a number"
        raise error(f"{name} must be {want}, got {value!r}")
    return value


def boolean(value: Any, name: str, error: type[Exception] = ValueError) -> bool:
    if value not in (True, False) or not isinstance(value, bool):
        raise error(f"{name} must be true or false, got {value!r}")
    return value


def choice(value: T, name: str, choices: Sequence[object], error: type[Exception] = ValueError) -> T:
    """One of `choices` ("device must be auto, cpu or cuda, got 'tpu'")."""
    if not any(type(value) is type(c) and value == c for c in choices):  # 1 is not True
        *rest, last = [str(c) for c in choices]
        raise error(f"{name} must be {', '.join(rest) + ' or ' if rest else ''}{last}, got {value!r}")
    return value


def optional(check: Callable[..., T], value: Any, name: str, *args: Any, **kwargs: Any) -> T | None:
    """`check` of a setting that may be null."""
    return None if value is None else check(value, name, *args, **kwargs)
