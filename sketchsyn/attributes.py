"""Read-only public attributes, in one line each, and the lazily loaded names of a package.

Constructor arguments are kept as public read-only attributes (``php.epsilon``, ``sketch.width``)
and the state behind them stays private (``self._epsilon``). :class:`ReadOnly` is the one-line
form of the four-line ``@property`` that only returns ``self._<name>``::

    class Counter:
        horizon = ReadOnly[int]("The public horizon ``T``.")

        def __init__(self, horizon: int) -> None:
            self._horizon = horizon

A property that computes or copies something stays a ``@property``. The docs site shows each
``ReadOnly`` with its text, as it shows a property's docstring.

>>> class Counter:
...     horizon = ReadOnly[int]("The public horizon ``T``.")
...     def __init__(self, horizon):
...         self._horizon = horizon
>>> c = Counter(8)
>>> c.horizon, Counter.horizon.__doc__
(8, 'The public horizon ``T``.')
>>> c.horizon = 9
Traceback (most recent call last):
    ...
AttributeError: Counter.horizon is read-only

A package whose public names load on first use (``import sketchsyn`` stays cheap) sets its
module ``__getattr__`` with :func:`lazy_exports`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, overload

__all__ = ["ReadOnly", "lazy_exports"]

T = TypeVar("T")


class ReadOnly(Generic[T]):
    """A read-only attribute that returns ``self._<name>`` (``<name>``: the attribute's own)."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc
        self._name = self._private = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = f"{owner.__name__}.{name}"
        self._private = f"_{name}"

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> ReadOnly[T]: ...

    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...

    def __get__(self, obj: object | None, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj, self._private)

    def __set__(self, obj: object, value: object) -> None:
        raise AttributeError(f"{self._name} is read-only")

    def __delete__(self, obj: object) -> None:
        raise AttributeError(f"{self._name} is read-only")


def lazy_exports(namespace: dict[str, Any], exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of a package whose public names load on first use.

    ``exports`` maps each name to the module of the package that defines it (dotted, relative
    to the package); the first access imports that module and keeps the value in ``namespace``
    (the package's ``globals()``), so later accesses are plain lookups. Any other name raises
    :class:`AttributeError`. This module imports nothing heavy, so a package that uses it still
    imports in a few milliseconds.

    >>> namespace = {"__name__": "json"}
    >>> get = lazy_exports(namespace, {"JSONDecoder": "decoder"})
    >>> get("JSONDecoder").__name__, "JSONDecoder" in namespace
    ('JSONDecoder', True)
    >>> get("nothing")
    Traceback (most recent call last):
        ...
    AttributeError: module 'json' has no attribute 'nothing'
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    return __getattr__
