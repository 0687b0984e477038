"""Domains: the abstract `Domain`, the continuous `Box` and the bit-string `BitDomain` (encode
records to cell codes in Morton order, decode cells, cell geometry).
"""

from __future__ import annotations

from .domain import BitDomain, Box, Domain, domain_from_dict

__all__ = [
    "BitDomain",
    "Box",
    "Domain",
    "domain_from_dict",
]
