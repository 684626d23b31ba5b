"""A registry of declarations by name, read live: what benchmarks and scoring profiles share.

A declaration is registered by the module that defines it, so the registry imports its declaring modules the
first time it is read (`load`), never at its own import: a declaring module may import the registry freely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from adapters.errors import MemfarmError

T = TypeVar("T")


class Declarations(Mapping, Generic[T]):
    """Declarations of one kind (`what`: "benchmark", "scoring profile") by name, in the order of their names.

    `load` imports the modules that declare them, once, before the first read. `names(declared)` gives every name a
    declaration goes by (its own and its old ones); `origin(declared)` the module a message names."""

    def __init__(self, what: str, load: Callable[[], None], names: Callable[[T], tuple[str, ...]],
                 origin: Callable[[T], str]):
        self.what, self._load, self._names, self._origin = what, load, names, origin
        self._registered: dict[str, T] = {}
        self._loaded = False

    def register(self, declared: T) -> T:
        """Add `declared`; a second declaration of one name (or of a name another goes by) is refused. The same
        declaration again (its module imported twice) is no conflict."""
        own = self._names(declared)
        for name in own:
            known = self._registered.get(name) or next(
                (d for d in self._registered.values() if name in self._names(d)), None)
            if known is not None and known != declared:
                raise MemfarmError(f"{self.what} {name!r} is declared twice ({self._origin(known)} and "
                                   f"{self._origin(declared)})")
        self._registered[own[0]] = declared
        return declared

    def unregister(self, name: str) -> None:
        """Take a declaration out (a test's own, once the test is done)."""
        self._registered.pop(name, None)

    def _ready(self) -> None:
        if not self._loaded:
            self._loaded = True
            self._load()

    def __getitem__(self, name: str) -> T:
        self._ready()
        return self._registered[name]

    def __iter__(self) -> Iterator[str]:  # by name: the order modules happen to be imported in is no order
        self._ready()
        return iter(sorted(self._registered))

    def __len__(self) -> int:
        self._ready()
        return len(self._registered)

    def __repr__(self) -> str:
        return f"{self.what} declarations({', '.join(self)})"
