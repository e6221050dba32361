"""From a JSON mapping to a frozen dataclass of the contract and back, field by field, by
the field's declared type: a nested dataclass is built the same way, `Settings` fields
become read-only mappings, tuples stay tuples. A key the class does not know is refused
in one line that names it (`where`: "cluster", "framework", ...).

Each field is declared once, with its type and, where it has one, its rule (`setting`: an
integer's least value, a number's bounds, the values it may take); `check` holds a mapping
from the config to those declarations before anything is made of it, in one line per
mistake, by contract/values.py's rule. Standard library only."""
import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from . import values
from .frozen import Settings, freeze, thaw

T = TypeVar("T")


class UnknownKey(ValueError):
    """A mapping holds a key its dataclass does not declare."""


def setting(default: Any = dataclasses.MISSING, *, minimum: int | None = None, above: float | None = None,
            at_most: float | None = None, choices: Sequence[object] | None = None, key: str | None = None) -> Any:
    """A field and its rule beyond its type: an integer's least value (`minimum`), a number's
    open lower bound (`above`) and its upper bound (`at_most`), the values a text may take
    (`choices`), and `key`, the setting's name where the config spells it otherwise."""
    rule = {"minimum": minimum, "above": above, "at_most": at_most, "choices": choices, "key": key}
    return dataclasses.field(default=default, metadata={"rule": rule})


def _is_dataclass_type(kind: object) -> bool:
    """A dataclass itself (a field's type), not one of its instances."""
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def _kind(cls: type, field: dataclasses.Field[Any]) -> tuple[Any, bool]:
    """(the field's type without Optional, whether None is allowed)."""
    hint = typing.get_type_hints(cls)[field.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    kind, optional = (args[0], True) if union and len(args) == 1 else (hint, False)
    return (tuple if typing.get_origin(kind) is tuple else kind), optional   # tuple[str, ...] is a tuple


def _unknown(cls: type, extra: list[str], where: str) -> UnknownKey:
    names = [f.name for f in dataclasses.fields(cls)]
    said = ", ".join(repr(k) for k in extra)
    return UnknownKey(f"unknown {where + ' ' if where else ''}key{'s' if len(extra) > 1 else ''} "
                      f"{said} (valid: {', '.join(names)})")


def check(cls: type, mapping: Mapping[str, Any], where: str = "") -> None:
    """Every value of `mapping` by its field's declaration in `cls`; ValueError in one line
    that names the setting as the config spells it (`where` is the prefix: "health.expect").

    int, float and bool by contract/values.py's rule with the field's bounds; a text by its
    choices where it has some; a tuple is a list, `Settings` a mapping, a nested dataclass a
    mapping of its fields, checked the same way. None is allowed for an Optional field and
    for a list or mapping; a key `cls` does not declare is UnknownKey."""
    names = {f.name for f in dataclasses.fields(cls)}
    extra = [k for k in mapping if k not in names]
    if extra:
        raise _unknown(cls, extra, where)
    for f in dataclasses.fields(cls):
        if f.name in mapping:
            _check_value(cls, f, mapping[f.name], where)


def _check_value(cls: type, f: dataclasses.Field[Any], value: object, where: str) -> None:
    kind, optional = _kind(cls, f)
    rule = f.metadata.get("rule", {})
    name = rule.get("key") or (f"{where}.{f.name}" if where else f.name)
    container = kind in (tuple, Settings) or _is_dataclass_type(kind)
    if value is None and (optional or container):
        return
    if _is_dataclass_type(kind):
        if isinstance(value, kind):  # made already (the parallel Layout)
            return
        if not isinstance(value, dict):
            fields = ", ".join(g.name for g in dataclasses.fields(kind))
            raise ValueError(f"{name} must be a mapping of {fields}, got {value!r}")
        check(kind, value, name)
    elif kind is tuple and not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be a list, got {value!r}")
    elif kind is Settings and not isinstance(value, (dict, Settings)):
        raise ValueError(f"{name} must be a mapping, got {value!r}")
    elif kind is bool:
        values.boolean(value, name)
    elif kind is int:
        values.integer(value, name, rule.get("minimum"))
    elif kind is float:
        values.number(value, name, rule.get("above"), rule.get("at_most"))
    elif rule.get("choices"):
        values.choice(value, name, rule["choices"])


def build(cls: type[T], mapping: Mapping[str, Any] | None, where: str, unknown: str = "refuse") -> T:
    """cls(**mapping), converted by field types. unknown="refuse" raises UnknownKey for a key
    cls lacks; "drop" leaves it out (files written by a later suite)."""
    mapping = dict(mapping or {})
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # cls: a dataclass
    extra = sorted((k for k in mapping if k not in names), key=str)
    if extra and unknown == "refuse":
        raise _unknown(cls, extra, where)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # cls: a dataclass
        if f.name not in mapping:
            continue
        value, (kind, _) = mapping[f.name], _kind(cls, f)
        if value is None:
            kwargs[f.name] = None
        elif _is_dataclass_type(kind) and isinstance(value, dict):
            kwargs[f.name] = build(kind, value, f"{where}.{f.name}" if where else f.name, unknown)
        elif kind is Settings:
            kwargs[f.name] = Settings(value)
        elif kind is tuple:
            kwargs[f.name] = tuple(freeze(v) for v in value)
        else:
            kwargs[f.name] = freeze(value)
    return cls(**kwargs)


def plain(obj: Any) -> dict[str, Any]:
    """A dataclass of the contract as plain JSON values (what its file holds)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and hasattr(value, "as_dict"):
            out[f.name] = value.as_dict()
        elif dataclasses.is_dataclass(value):
            out[f.name] = plain(value)
        else:
            out[f.name] = thaw(value)
    return out
