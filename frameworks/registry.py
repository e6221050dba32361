"""The framework registry: each framework declares one `Adapter` in its package's
__init__.py (frameworks/<name>/__init__.py: `ADAPTER = Adapter(..., package=__name__)`), and the harness
reads it here (`get`): the benches it runs (train, input, comm) and the session of each,
its out-of-memory rule, its data=files loaders.

An adapter names its sessions by lazy references, "module:attribute" as entry points do
(".worker:JaxSession": relative to the framework's package), so that reading an adapter
imports no framework: a framework that cannot import still has its adapter, and its rank a
record that says why. Standard library only: this runs in every framework's Python.
"""
import importlib
from dataclasses import dataclass, field
from typing import Mapping, Optional

from frameworks.common.capability import Unsupported


def resolve(ref, package: Optional[str] = None):
    """What a lazy reference names ("module:Name.attr", the module relative to `package`
    where it starts with a dot); anything else is taken as the object itself."""
    if not isinstance(ref, str):
        return ref
    module, _, path = ref.partition(":")
    obj = importlib.import_module(module, package)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Bench:
    """One bench of a framework: `session(spec, dist) -> harness.Session`, and the session
    of data=files where the bench also trains from files (None: the session reads them
    itself, or the bench has no such mode)."""
    session: object
    files: object = None


@dataclass(frozen=True)
class Adapter:
    name: str
    benches: Mapping[str, Bench]
    oom: object = None               # is_oom(exc) -> bool; None: the harness's (MemoryError)
    data_backends: tuple = ()        # data=files loaders (data.backend), the default first
    package: Optional[str] = field(default=None, repr=False)  # of relative references

    def bench(self, name: str) -> Bench:
        """The bench `name`, or Unsupported where the framework has none."""
        try:
            return self.benches[name]
        except KeyError:
            raise Unsupported(f"bench={name} is not implemented for {self.name} yet") from None

    def load(self, ref):
        """What one of this adapter's references names (imports its module)."""
        return resolve(ref, self.package)

    def oom_rule(self):
        """The framework's is_oom(exc) (imports its module), or None where it declares none."""
        return None if self.oom is None else self.load(self.oom)


def get(name: str) -> Adapter:
    """The adapter framework `name` declares (frameworks/<name>/__init__.py); importing it
    imports no framework. ModuleNotFoundError where the suite has no such framework."""
    return importlib.import_module(f"{__package__}.{name}").ADAPTER
