"""Public domains and their binary hierarchical decomposition.

A level-``l`` cell is named by an ``l``-bit prefix. :class:`Box` cuts coordinate ``(l − 1) mod d``
in half at level ``l`` (round robin; level 1 cuts coordinate 0), so the prefix of a point's cell
is the top ``l`` bits of the Morton (bit-interleaved) code of the quantised point, and the prefix
of a depth-``r`` code at level ``l`` is ``code >> (r − l)``. :class:`BitDomain` is the integer
key space ``{0, …, 2**bits − 1}`` (IPv4 addresses: ``bits = 32``) whose level-``l`` cell is the
``l``-bit prefix of the key (a ``/l`` network). :class:`Schema` describes a table (categorical,
integer, numeric, datetime, IPv4 and boolean columns): each column's value becomes a code of
public length and a record's cell code interleaves the columns' bits (:mod:`.schema`).

Quantisation. At depth ``r`` coordinate ``i`` is cut ``b_i`` times (``b_i`` = the number of levels
``≤ r`` that cut it) and a point goes to cell ``q_i = floor((x_i − lo_i)/(hi_i − lo_i) · 2**b_i)``;
the upper bound itself goes into the last cell. Cells are half-open ``[a, b)`` except the last
one of each coordinate, which is closed. :meth:`Box.cell_bounds` returns the exact dyadic corners
mapped to user units by the same affine map, so a point within one floating-point rounding of a
cell boundary may be encoded into the neighbouring cell (on the unit box everything is exact).

Metric. For ``Box``: ℓ∞ after scaling every coordinate to [0, 1] (the "unit box",
:meth:`Box.normalize`); for ``BitDomain``: ``|x − y| / 2**bits``. Diameters of level-``l`` cells
in that metric: ``gamma(l) = 2**−floor(l/d)`` (Box) and ``2**−l`` (BitDomain).

>>> box = Box([0.0, 0.0], [1.0, 1.0])
>>> box.encode([[0.2, 0.7], [0.9, 0.1]], depth=2).tolist()   # level 1: x ≥ .5?, level 2: y ≥ .5?
[1, 2]
>>> lo, hi = box.cell_bounds(2, [1])
>>> lo.tolist(), hi.tolist()
([[0.0, 0.5]], [[0.5, 1.0]])
>>> BitDomain.ipv4().encode(["10.0.0.1", "192.168.1.1"], depth=8).tolist()
[10, 192]
>>> Domain.from_dict(box.to_dict()) == box
True
"""

from __future__ import annotations

from .base import Domain, domain_from_dict
from .bitdomain import BitDomain
from .box import Box
from .schema import Schema

__all__ = [
    "BitDomain",
    "Box",
    "Domain",
    "Schema",
    "domain_from_dict",
]
