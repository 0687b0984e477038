"""The registry of summary kinds: every concrete public :class:`~sketchsyn.io.summary.Summary`
subclass, found by the kind it writes.

A class joins by being defined (``Summary.__init_subclass__`` calls :func:`register`), so
:func:`sketchsyn.io.checkpoint.load` reads any kind and the conformance suite enrols every class
without a list to forget. This module imports nothing of ``io``: the summary base and the
checkpoint functions both use it, and neither imports the other's users.

>>> from sketchsyn import CountMinSketch
>>> registry()["CountMinSketch"] is CountMinSketch
True
"""

from __future__ import annotations

import inspect
import sys
import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType

__all__ = ["add_discovery", "register", "registry"]

_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()
_DISCOVERY: list[Callable[[], None]] = []
_FORGOTTEN: set[str] = set()


def register(cls: type) -> None:
    """Record a subclass of the summary base (called when the class is defined)."""
    _CLASSES.add(cls)


def add_discovery(hook: Callable[[], None]) -> None:
    """Run ``hook`` (it imports the modules that define summaries, e.g. a plug-in's) before
    :func:`registry` answers. The package's own summaries are found through
    ``sketchsyn._import_summaries``, which the top-level package defines."""
    if hook not in _DISCOVERY:
        _DISCOVERY.append(hook)


def _discover() -> None:
    # The top-level package is always imported before this module; asking it (rather than
    # importing the packages of summaries here) keeps this lower layer free of upward imports.
    top = sys.modules.get(__name__.split(".")[0])
    for hook in [getattr(top, "_import_summaries", None), *_DISCOVERY]:
        if hook is not None:
            hook()


def _concrete(cls: type) -> bool:
    return not inspect.isabstract(cls) and not cls.__name__.startswith("_")


def registry() -> Mapping[str, type]:
    """Every concrete public summary class defined so far, by the kind it writes.

    Raises ``TypeError`` if two classes claim one kind.
    """
    _discover()
    found: dict[str, type] = {}
    for cls in sorted(_CLASSES, key=lambda c: (c.__module__, c.__qualname__)):
        kind = cls.kind  # type: ignore[attr-defined]
        if not _concrete(cls) or kind in _FORGOTTEN:
            continue
        other = found.get(kind)
        if other is not None and other is not cls:
            raise TypeError(f"{other.__qualname__} and {cls.__qualname__} both write {kind!r}")
        found[kind] = cls
    return MappingProxyType(found)


def _forget(kind: str) -> None:
    """Drop a kind from the registry (for classes defined in doctests and tests)."""
    _FORGOTTEN.add(kind)
