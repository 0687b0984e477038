"""Exception types and the one message format every check in sketchsyn uses.

Every error caused by a bad argument or bad data is a subclass of :class:`ValueError`, so
``except ValueError`` catches them all; the subclasses let callers tell them apart.

>>> from sketchsyn.errors import check_int
>>> check_int(0, "k", "PrivHP", minimum=1)
Traceback (most recent call last):
...
sketchsyn.errors.ParameterError: The 'k' parameter of PrivHP must be an int >= 1. Got 0 instead.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = [
    "BudgetExceededError",
    "ConcurrentUseError",
    "IncompatibleError",
    "InputError",
    "ParameterError",
    "ReleasedError",
    "SerializationError",
    "UtilityWarning",
    "MAX_STATE_BYTES",
    "check_bool",
    "check_choice",
    "check_domain",
    "check_memory",
    "check_epsilon",
    "check_int",
    "check_positive",
]


class ParameterError(ValueError):
    """A constructor or function parameter has an invalid value."""


class InputError(ValueError):
    """A data item or batch is invalid (NaN, wrong shape, negative key, ...).

    The whole batch is refused and the summary is left exactly as it was.
    """


class IncompatibleError(ValueError):
    """Two summaries cannot be combined (different width, depth, seeds, domain, ...)."""


class SerializationError(ValueError):
    """A serialised blob is truncated, altered, of another kind or of an unknown version."""


class BudgetExceededError(ValueError):
    """A privacy accountant was asked to spend more than it has left."""


class ReleasedError(RuntimeError):
    """A one-pass summary was updated after its release.

    Its noise was drawn once; releasing the same noise at two stream positions would reveal the
    exact count of the items in between, so a released summary refuses further updates.
    """


class ConcurrentUseError(RuntimeError):
    """Two threads tried to update one summary at the same time.

    A summary is not thread-safe; the update that found it busy is refused (nothing changed).
    Build one summary per thread and merge them.
    """


class UtilityWarning(UserWarning):
    """The parameters are valid, but the release will carry little signal (for example ε·n too
    small for the tree: below some level it is close to uniform). Privacy is unaffected.

    Filter it like any warning: ``warnings.simplefilter("error", UtilityWarning)`` turns it
    into an error, ``"ignore"`` silences it.
    """


def _fail(name: str, owner: str, requirement: str, value: object) -> ParameterError:
    return ParameterError(
        f"The {name!r} parameter of {owner} must be {requirement}. Got {value!r} instead."
    )


def check_int(
    value: object,
    name: str,
    owner: str,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """Return ``value`` as a Python int, or raise :class:`ParameterError`.

    Booleans and non-integral floats are refused; numpy integers are accepted.
    """
    if minimum is not None and maximum is not None:
        requirement = f"an int in [{minimum}, {maximum}]"
    elif minimum is not None:
        requirement = f"an int >= {minimum}"
    elif maximum is not None:
        requirement = f"an int <= {maximum}"
    else:
        requirement = "an int"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(name, owner, requirement, value)
    ivalue = int(value)
    if (minimum is not None and ivalue < minimum) or (maximum is not None and ivalue > maximum):
        raise _fail(name, owner, requirement, value)
    return ivalue


MAX_STATE_BYTES = 4 * 2**30  # 4 GiB: the largest state a summary may ask for


def check_memory(nbytes: int, owner: str, what: str) -> None:
    """Refuse, before allocating, a structure whose state would exceed ``MAX_STATE_BYTES``.

    >>> check_memory(2**40, "Demo", "width=2**37 × depth=1 counters")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sketchsyn.errors.ParameterError: Demo would need 1 TiB of memory for ...
    """
    if nbytes > MAX_STATE_BYTES:
        size = float(nbytes)
        for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
            if size < 1024 or unit == "ZiB":
                break
            size /= 1024
        raise ParameterError(
            f"{owner} would need {size:.4g} {unit} of memory for {what}; the limit is "
            f"{MAX_STATE_BYTES // 2**30} GiB (sketchsyn.errors.MAX_STATE_BYTES). Choose smaller "
            "parameters."
        )


def check_domain(domain: Any, owner: str) -> Any:
    """Refuse anything that is not a sketchsyn domain, naming the owner's parameter."""
    if not hasattr(domain, "encode") or not hasattr(domain, "max_depth"):
        raise ParameterError(
            f"The 'domain' parameter of {owner} must be a sketchsyn domain (Box, BitDomain). "
            f"Got {domain!r} instead."
        )
    return domain


def check_bool(value: object, name: str, owner: str) -> bool:
    """Return ``value`` if it is a real bool (``True``/``False``, numpy bools included).

    >>> check_bool("false", "raw", "PrivHP")
    Traceback (most recent call last):
    ...
    sketchsyn.errors.ParameterError: The 'raw' parameter of PrivHP must be True or False. Got 'false' instead.
    """  # noqa: E501
    if not isinstance(value, (bool, np.bool_)):
        raise _fail(name, owner, "True or False", value)
    return bool(value)


def check_positive(value: object, name: str, owner: str) -> float:
    """Return ``value`` as a float that is finite and > 0, or raise :class:`ParameterError`."""
    requirement = "a finite real number > 0"
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Fraction)):
        raise _fail(name, owner, requirement, value)
    fvalue = float(value)
    if not math.isfinite(fvalue) or fvalue <= 0:
        raise _fail(name, owner, requirement, value)
    return fvalue


EPSILON_RANGE = (2.0**-30, 2.0**20)
"""The privacy budgets every mechanism can realise: below 2**-30 the noise scale passes the
largest integer Laplace scale the samplers draw (2**30); above 2**20 (about 10**6) the noise is
smaller than one count and ε means nothing to an auditor."""


def check_epsilon(value: object, owner: str, name: str = "epsilon") -> float:
    """Check a privacy budget: a finite real number inside :data:`EPSILON_RANGE`.

    >>> check_epsilon(2**62, "Demo")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sketchsyn.errors.ParameterError: The 'epsilon' parameter of Demo must be a finite real number in [9.313e-10, 1.049e+06]. Got 4611686018427387904 instead.
    """  # noqa: E501
    low, high = EPSILON_RANGE
    requirement = f"a finite real number in [{low:.4g}, {high:.4g}]"
    fvalue = check_positive(value, name, owner)
    if not low <= fvalue <= high:
        raise _fail(name, owner, requirement, value)
    return fvalue


def check_choice(value: object, name: str, owner: str, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise :class:`ParameterError`."""
    if not isinstance(value, str) or value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise _fail(name, owner, f"one of {options}", value)
    return value
