"""Read-only values for the typed point and run spec: a JSON tree frozen (mappings become
Settings, lists tuples) and thawed back for writing, and `Settings`, a frozen mapping whose
keys also read as attributes (a model's or a bench's settings, whose keys differ per model).
Standard library only."""
from collections.abc import Iterator, Mapping
from typing import Any


def freeze(value: Any) -> Any:
    """A JSON value made read-only, all the way down."""
    if isinstance(value, Settings):
        return value
    if isinstance(value, Mapping):
        return Settings(value)
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A frozen value back to plain dicts and lists (what json writes)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    if hasattr(value, "as_dict"):  # a dataclass of the contract (the parallel Layout)
        return value.as_dict()
    return value


class Settings(Mapping[str, Any]):
    """A read-only mapping whose keys read as attributes too: `model.hidden`,
    `model["hidden"]`, `model.get("kv_heads")`. A missing key is an AttributeError for an
    attribute and a KeyError for an item, as on any object and mapping."""

    __slots__ = ("_d",)

    def __init__(self, values: Mapping[str, Any] | None = None, **more: Any) -> None:
        d = dict(values or {}, **more)
        object.__setattr__(self, "_d", {k: freeze(v) for k, v in d.items()})

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __getattr__(self, key: str) -> Any:
        try:
            return self._d[key]
        except KeyError:
            raise AttributeError(f"no setting {key!r} (has: {', '.join(self._d)})") from None

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("settings are read-only; use .replace(...)")

    def __repr__(self) -> str:
        return f"Settings({thaw(self._d)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and thaw(self._d) == thaw(dict(other))

    def __hash__(self) -> int:
        return hash(repr(self))

    def __reduce__(self) -> tuple[type, tuple[Any]]:  # pickles (submitit sends a search's point to its driver)
        return (Settings, (thaw(self._d),))

    def replace(self, **changes: Any) -> "Settings":
        return Settings({**self._d, **changes})

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = thaw(self._d)
        return out
