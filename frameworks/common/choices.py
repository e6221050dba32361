"""Name -> builder tables, as each framework's models.py keeps its models and optimizers.
Standard library only: this runs in the framework's Python."""


def pick(table: dict, name: str, what: str):
    """table[name], or a ValueError that names the valid choices."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown {what} {name!r} (known: {', '.join(sorted(table))})") from None
