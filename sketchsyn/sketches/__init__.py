"""Hashing equal to `mmh3` and the private or raw Count-Min and Count sketches built on it."""

from __future__ import annotations

from .hashing import HashFamily, as_keys, murmur3_32
from .sketch import CountMinSketch, CountSketch

__all__ = [
    "CountMinSketch",
    "CountSketch",
    "HashFamily",
    "as_keys",
    "murmur3_32",
]
