"""Read-only public attributes, in one line each.

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
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

__all__ = ["ReadOnly"]

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
