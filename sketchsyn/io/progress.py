"""Progress bars for long streams: a tqdm bar with rows/s on stderr, only when it is a terminal.

tqdm is optional (the ``cli`` extra installs it). :func:`progress` wraps an iterable of batches
(2-D arrays or DataFrames) or of single rows and advances the bar by the rows in each item. The
bar is off when ``enabled`` is False (``--quiet``), when stderr is not a terminal, or when tqdm
is missing; the iterable is then returned unchanged, so the off path costs nothing.

>>> import numpy as np
>>> batches = [np.zeros((3, 2)), np.zeros((2, 2))]
>>> [b.shape[0] for b in progress(batches, enabled=False)]
[3, 2]
>>> progress(batches, enabled=False) is batches
True
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

__all__ = ["progress", "wants_bar"]


def wants_bar(enabled: bool | None = None, stream: TextIO | None = None) -> bool:
    """Whether a bar would be shown: ``enabled`` (None = auto) and ``stream`` is a terminal.

    ``enabled=True`` forces a bar even when stderr is not a terminal (still needs tqdm).

    >>> wants_bar(False)
    False
    """
    if enabled is False:
        return False
    stream = sys.stderr if stream is None else stream
    if enabled is None and not (hasattr(stream, "isatty") and stream.isatty()):
        return False
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def _rows(item: Any, batched: bool) -> int:
    shape = getattr(item, "shape", None)
    if shape is not None and (len(shape) == 2 or (batched and len(shape) == 1)):
        return int(shape[0])
    return 1


def progress(
    iterable: Iterable[Any],
    enabled: bool | None = None,
    total: int | None = None,
    desc: str = "rows",
    stream: TextIO | None = None,
    batched: bool = False,
) -> Iterable[Any]:
    """``iterable`` with a rows/s bar on ``stream`` (default stderr) when :func:`wants_bar`.

    Parameters
    ----------
    iterable : iterable of 2-D batches or of single rows
    enabled : bool or None
        None (default): a bar only when the stream is a terminal; False: never; True: always.
    total : int, optional
        Expected number of rows (a public guess, shown as the bar's end).
    desc : str
        Label of the bar.
    stream : file, optional
        Where the bar goes (default ``sys.stderr``).
    batched : bool
        Every item is a batch, 1-D ones included (arrays of keys); by default a 1-D item is one
        row and a 2-D item a batch of rows.
    """
    if not wants_bar(enabled, stream):
        return iterable
    return _with_bar(iterable, total, desc, sys.stderr if stream is None else stream, batched)


def _with_bar(
    iterable: Iterable[Any], total: int | None, desc: str, stream: TextIO, batched: bool
) -> Iterator:
    from tqdm import tqdm

    with tqdm(total=total, unit=" rows", unit_scale=True, desc=desc, file=stream) as bar:
        for item in iterable:
            yield item
            bar.update(_rows(item, batched))
