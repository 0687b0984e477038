"""The IPv4 address space as a picture: each /16 network one pixel of a 256 × 256 grid laid out
along a Hilbert curve, so that every /8 network is a 16 × 16 square and neighbouring addresses
stay close (the layout of the well-known "map of the internet" pictures).

:func:`prefix_counts` turns keys into counts per /16 (bounded memory: 65,536 counters, batch by
batch), :func:`hilbert_image` lays counts out on the grid, and :func:`draw_ipv4_map` draws one
grid on a matplotlib axis (matplotlib is the optional extra ``plot``; only that function needs it).

>>> import numpy as np
>>> counts = prefix_counts(np.array([(10 << 24) | (1 << 16) | 5], dtype=np.uint64))
>>> int(counts.sum()), int(np.flatnonzero(counts)[0]) == (10 << 8) | 1
(1, True)
>>> img = hilbert_image(counts)
>>> img.shape, float(img.sum())
((256, 256), 1.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ParameterError

__all__ = ["draw_ipv4_map", "hilbert_image", "hilbert_xy", "prefix_counts"]

DECADES = 6  # the colour scale of draw_ipv4_map spans at most six decades
_N16 = 1 << 16


def hilbert_xy(order: int, index: Any) -> tuple[np.ndarray, np.ndarray]:
    """Column and row of position ``index`` along a Hilbert curve of a ``2**order`` square grid.

    Consecutive runs of ``4**k`` positions starting at a multiple of ``4**k`` fill aligned
    ``2**k × 2**k`` squares, and consecutive positions are neighbouring cells.

    Parameters
    ----------
    order : int
        The grid is ``2**order × 2**order`` (``0 ≤ order ≤ 16``).
    index : array_like of int
        Positions ``0 … 4**order − 1``.

    Returns
    -------
    (ndarray, ndarray)
        ``x`` (column) and ``y`` (row), int64.

    Examples
    --------
    >>> x, y = hilbert_xy(1, [0, 1, 2, 3])
    >>> x.tolist(), y.tolist()
    ([0, 0, 1, 1], [0, 1, 1, 0])
    >>> x, y = hilbert_xy(4, np.arange(256))
    >>> int((abs(np.diff(x)) + abs(np.diff(y))).max())  # each step moves to a neighbour
    1
    """
    if not isinstance(order, (int, np.integer)) or not 0 <= order <= 16:
        raise ParameterError(
            f"The 'order' parameter of hilbert_xy must be an int in [0, 16]. Got {order!r} instead."
        )
    t = np.array(index, dtype=np.int64)
    if t.size and (t.min() < 0 or t.max() >= 4**order):
        raise ParameterError(
            f"The 'index' parameter of hilbert_xy must hold positions in [0, 4**{order}). "
            f"Got values in [{t.min()}, {t.max()}] instead."
        )
    x = np.zeros_like(t)
    y = np.zeros_like(t)
    s = 1
    while s < (1 << order):
        rx = (t >> 1) & 1
        ry = (t ^ rx) & 1
        # Rotate the sub-square: a reflection when rx = 1 and ry = 0, then swap x and y.
        flip = (ry == 0) & (rx == 1)
        x = np.where(flip, s - 1 - x, x)
        y = np.where(flip, s - 1 - y, y)
        swap = ry == 0
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        x += s * rx
        y += s * ry
        t >>= 2
        s <<= 1
    return x, y


def prefix_counts(keys: Any, counts: np.ndarray | None = None) -> np.ndarray:
    """Add the number of IPv4 keys in each /16 network to ``counts`` (65,536 int64, new if None).

    Examples
    --------
    >>> c = prefix_counts(np.array([0, 65535, 65536], dtype=np.uint64))
    >>> c[:2].tolist()
    [2, 1]
    """
    k = np.asarray(keys)
    if k.dtype.kind not in "iuf" or (k.size and (k.min() < 0 or k.max() >= 2**32)):
        raise ParameterError(
            "The 'keys' parameter of prefix_counts must hold IPv4 keys in [0, 2**32). "
            f"Got dtype {k.dtype} instead."
        )
    top = (k.astype(np.uint64) >> np.uint64(16)).astype(np.int64)
    batch = np.bincount(top.ravel(), minlength=_N16)
    if counts is None:
        return batch
    counts += batch
    return counts


def hilbert_image(counts16: Any) -> np.ndarray:
    """The 256 × 256 image of per-/16 values (index ``a·256 + b`` for ``a.b.0.0/16``).

    The /8 network ``a`` is the 16 × 16 square at ``16 · hilbert_xy(4, a)``.

    Examples
    --------
    >>> v = np.zeros(65536); v[(10 << 8) | 1] = 3.0
    >>> img = hilbert_image(v)
    >>> x, y = hilbert_xy(8, [(10 << 8) | 1])
    >>> float(img[y[0], x[0]])
    3.0
    """
    v = np.asarray(counts16, dtype=np.float64)
    if v.shape != (_N16,):
        raise ParameterError(
            "The 'counts16' parameter of hilbert_image must have shape (65536,), one value per "
            f"/16 network. Got shape {v.shape} instead."
        )
    x, y = hilbert_xy(8, np.arange(_N16))
    img = np.zeros((256, 256))
    img[y, x] = v
    return img


def draw_ipv4_map(
    ax: Any, shares16: Any, title: str, vmin: float, vmax: float, mark: Any = ()
) -> Any:
    """Draw per-/16 shares on ``ax``: log colour scale, /8 squares outlined and numbered.

    Networks with share 0 are left blank; the /16 networks listed in ``mark`` (indices
    ``a·256 + b``) are circled in red and named with their share. The colour scale spans at
    most :data:`DECADES` decades below ``vmax`` (a near-empty cell does not stretch it; smaller
    shares take its lowest colour). The /8 numbers are white with a dark outline, readable on
    every colour. Returns the image artist (for a colour bar).
    """
    from matplotlib import patheffects
    from matplotlib.colors import LogNorm

    vmin = max(vmin, vmax * 10.0**-DECADES)

    img = hilbert_image(shares16)
    masked = np.ma.masked_less_equal(img, 0.0)
    art = ax.imshow(
        masked,
        origin="upper",
        interpolation="nearest",
        cmap="viridis",
        norm=LogNorm(vmin=vmin, vmax=vmax),
    )
    ax.set_facecolor("#f2f2f2")
    for edge in range(0, 257, 16):
        ax.axhline(edge - 0.5, color="white", lw=0.4)
        ax.axvline(edge - 0.5, color="white", lw=0.4)
    bx, by = hilbert_xy(4, np.arange(256))
    for a in range(256):
        ax.text(
            16 * bx[a] + 7.5,
            16 * by[a] + 7.5,
            str(a),
            ha="center",
            va="center",
            fontsize=4.5,
            color="white",
            path_effects=[patheffects.withStroke(linewidth=1.2, foreground="#333333")],
        )
    marks = np.asarray(mark, dtype=np.int64)
    if marks.size:
        mx, my = hilbert_xy(8, marks)
        ax.scatter(mx, my, s=90, facecolors="none", edgecolors="red", linewidths=1.0)
        v = np.asarray(shares16, dtype=np.float64)
        for x, y, p in zip(mx.tolist(), my.tolist(), marks.tolist(), strict=True):
            ax.annotate(
                f"{p >> 8}.{p & 255}/16: {100 * v[p]:.3g}%",
                (x, y),
                xytext=(6 if x < 180 else -90, -14 if y < 24 else 6),
                textcoords="offset points",
                fontsize=7,
                color="red",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.7},
            )
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlim(-0.5, 255.5)
    ax.set_ylim(255.5, -0.5)
    ax.set_title(title, fontsize=10)
    return art
