"""A cache for the exact arithmetic of public parameters (noise scales, budget shares).

Working out a noise scale as an exact rational costs tens of microseconds; a process that
builds many structures alike (one per partition, per level, per trial of an audit) asks for
the same few scales again and again. :func:`cached` remembers them. Its arguments are public
parameters, never data.

>>> calls = []
>>> @cached
... def double(x):
...     calls.append(x)
...     return 2 * x
>>> double(3), double(3), calls
(6, 6, [3])
>>> double([1]), calls  # an unhashable argument: called uncached, its own checks still run
([1, 1], [3, [1]])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["cached"]

F = TypeVar("F", bound=Callable[..., Any])


def cached(fn: F) -> F:
    """``fn`` (a pure function of hashable public parameters) with its results kept, typed (an
    int and a float of one value are different keys, as are ``True`` and ``1``), at most 4,096
    of them. An unhashable argument (a numpy array, a list) calls ``fn`` uncached, so that its
    own checks name the argument as they would."""
    inner = functools.lru_cache(maxsize=4096, typed=True)(fn)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            hash((args, tuple(kwargs.items())))
        except TypeError:
            return fn(*args, **kwargs)
        return inner(*args, **kwargs)

    call.cache_clear = inner.cache_clear  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]
