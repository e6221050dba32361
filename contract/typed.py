"""From a JSON mapping to a frozen dataclass of the contract and back, field by field, by
the field's declared type: a nested dataclass is built the same way, `Settings` fields
become read-only mappings, tuples stay tuples. A key the class does not know is refused
in one line that names it (`where`: "cluster", "framework", ...). Standard library only."""
import dataclasses
import types
import typing

from .frozen import Settings, freeze, thaw


class UnknownKey(ValueError):
    """A mapping holds a key its dataclass does not declare."""


def _kind(cls, field):
    hint = typing.get_type_hints(cls)[field.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return args[0] if union and len(args) == 1 else hint


def build(cls, mapping, where: str, unknown: str = "refuse"):
    """cls(**mapping), converted by field types. unknown="refuse" raises UnknownKey for a key
    cls lacks; "drop" leaves it out (files written by a later suite)."""
    mapping = dict(mapping or {})
    names = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(set(mapping) - names)
    if extra and unknown == "refuse":
        raise UnknownKey(f"unknown {where} key(s): {', '.join(map(str, extra))} "
                         f"(valid: {', '.join(sorted(names))})")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in mapping:
            continue
        value, kind = mapping[f.name], _kind(cls, f)
        if value is None:
            kwargs[f.name] = None
        elif dataclasses.is_dataclass(kind) and isinstance(value, dict):
            kwargs[f.name] = build(kind, value, f"{where}.{f.name}", unknown)
        elif kind is Settings:
            kwargs[f.name] = Settings(value)
        elif kind is tuple:
            kwargs[f.name] = tuple(freeze(v) for v in value)
        else:
            kwargs[f.name] = freeze(value)
    return cls(**kwargs)


def plain(obj) -> dict:
    """A dataclass of the contract as plain JSON values (what its file holds)."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and hasattr(value, "as_dict"):
            out[f.name] = value.as_dict()
        elif dataclasses.is_dataclass(value):
            out[f.name] = plain(value)
        else:
            out[f.name] = thaw(value)
    return out
