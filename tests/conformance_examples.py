"""Small, fast, seeded examples of every stateful sketchsyn class, for the conformance suite.

Each :class:`Example` says how to build an instance of one kind with fixed seeds (``make``), feed
it data through the class's own protocol (``feed``), which data (``data``: a small batch,
``one``: a single record), how to feed it item by item, and which batches the class must refuse
(``bad``). ``build(seed, data)`` is the summary of ``data``; ``build(seed, None)`` the empty one.
Releases (``PrivateDistribution``, ``LowDimDistribution``) are built as the release of a
summary of the data.

tests/test_conformance.py and tests/test_fuzz_headers.py import this module (the tests
directory is on ``sys.path``, it has no ``__init__``); the fuzz subprocess does the same.

>>> sorted(EXAMPLES)[:2]
['AdaptiveGrid', 'BinaryMechanism']
>>> EXAMPLES["CountMinSketch"].build(1).nbytes > 0
True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["EXAMPLES", "Example"]


def _update_many(obj: Any, data: Any) -> None:
    obj.update_many(data)


def _rows(data: Any) -> Iterable[Any]:
    return list(data)


@dataclass
class Example:
    """How to build, feed and refuse-feed one kind."""

    kind: str
    make: Callable[[int], Any]  # seed -> a fresh instance, nothing fed
    data: Callable[[], Any]  # a small valid batch
    one: Callable[[], Any]  # a batch of one record
    bad: Callable[[], list[tuple[str, Any]]] = lambda: []  # (label, batch the class refuses)
    feed: Callable[[Any, Any], Any] = _update_many
    items: Callable[[Any], Iterable[Any]] | None = _rows  # None: no item-by-item update
    # Continual counters draw noise as they step; the exact sampler's word use depends on how
    # many values one call draws, so batch and item-by-item compare exactly only with the
    # sampler replaced by a deterministic tape (tests/test_conformance.py does it).
    taped: bool = False
    # Releases: seed, data -> the release (no make/feed protocol of their own).
    built: Callable[[int, Any], Any] | None = None
    # The "empty" side of the neighbouring pair (default: nothing fed); ``one`` is then the
    # same records plus one (for a release that needs a few records to exist at all).
    base: Callable[[], Any] | None = None
    # More constructions of the same kind (raw sketches, other estimators), fed the same data
    # by the round-trip, batch and merge checks: name -> seed -> a fresh instance.
    variants: dict[str, Callable[[int], Any]] = field(default_factory=dict)
    # Constructions ("" for ``make``) whose merge of two halves equals the whole stream.
    merge_exact: tuple[str, ...] = ()
    # ``nbytes`` is fixed at construction (False: the state grows by design).
    fixed_nbytes: bool = True
    # ``release()`` may be called at every step (continual observation): no release-once rule.
    continual: bool = False
    # What makes a fed instance releasable, if feeding is not enough (a two-pass mechanism
    # fixes its subspace and reads the data again).
    ready: Callable[[Any], Any] | None = None

    def makers(self) -> dict[str, Callable[[int], Any]]:
        """``make`` (named "") and every variant."""
        return {"": self.make, **self.variants} if self.make is not None else {}

    def build(self, seed: int, data: Any = "data") -> Any:
        """The instance built with ``seed`` fed ``data`` ("data", "one", "empty" or a batch)."""
        if isinstance(data, str):
            data = {"data": self.data, "one": self.one, "empty": self.base or (lambda: None)}[
                data
            ]()
        if self.built is not None:
            return self.built(seed, data)
        obj = self.make(seed)
        if data is not None:
            self.feed(obj, data)
        return obj


# ------------------------------------------------------------------ data
def _points(d: int = 2, n: int = 40) -> Callable[[], np.ndarray]:
    return lambda: np.random.default_rng(1).beta(2, 5, size=(n, d))


def _one_point(d: int = 2) -> Callable[[], np.ndarray]:
    return lambda: np.full((1, d), 0.3)


def _bad_points(d: int = 2) -> Callable[[], list[tuple[str, Any]]]:
    def bad() -> list[tuple[str, Any]]:
        nan = _points(d)()
        nan[7, d - 1] = np.nan
        return [
            ("nan-row", nan),
            ("wrong-width", _points(d + 1)()),
            ("wrong-dtype", np.full((3, d), "a", dtype=object)),
        ]

    return bad


def _keys() -> np.ndarray:
    return np.random.default_rng(1).zipf(1.3, size=60).astype(np.uint64)


def _bad_keys() -> list[tuple[str, Any]]:
    neg = _keys().astype(np.int64)
    neg[30] = -3
    return [("negative-key", neg), ("float-keys", np.full(5, 0.5))]


def _steps() -> np.ndarray:
    return np.random.default_rng(1).integers(0, 3, size=40)


def _bad_steps() -> list[tuple[str, Any]]:
    neg = _steps()
    neg[20] = -1
    return [("negative", neg), ("nan", np.array([1.0, np.nan, 2.0])), ("2-d", np.ones((4, 2)))]


def _bank_steps(size: int) -> Callable[[], np.ndarray]:
    return lambda: np.random.default_rng(1).integers(0, 3, size=(30, size))


def _bad_bank_steps(size: int) -> Callable[[], list[tuple[str, Any]]]:
    def bad() -> list[tuple[str, Any]]:
        neg = _bank_steps(size)()
        neg[10, 1] = -1
        return [("negative", neg), ("wrong-width", _bank_steps(size + 1)())]

    return bad


def _bits(n: int, periods: int, alphabet: int = 2) -> Callable[[], np.ndarray]:
    return lambda: np.random.default_rng(1).integers(0, alphabet, size=(periods, n))


def _bad_bits(n: int) -> Callable[[], list[tuple[str, Any]]]:
    def bad() -> list[tuple[str, Any]]:
        col = _bits(n, 2)()
        col[1, 3] = 7
        nan = _bits(n, 2)().astype(float)
        nan[0, 2] = np.nan
        return [("out-of-alphabet", col), ("nan", nan), ("wrong-width", _bits(n + 1, 2)())]

    return bad


# A table: every column kind, with unused code tails (3 categories, 12 months).
TABLE_SCHEMA = {
    "columns": [
        {"name": "carrier", "kind": "categorical", "categories": ["9E", "AA", "AS"]},
        {"name": "month", "kind": "integer", "low": 1, "high": 12},
        {"name": "delay", "kind": "numeric", "low": -120, "high": 1440},
        {"name": "when", "kind": "datetime", "low": "2013-01-01", "high": "2014-01-01"},
        {"name": "client", "kind": "ipv4"},
        {"name": "ok", "kind": "boolean"},
    ]
}


def _schema() -> Any:
    return _c("Schema").from_dict(TABLE_SCHEMA)


def _table(n: int = 40, seed: int = 1) -> Any:
    """A pandas DataFrame of ``n`` rows of :data:`TABLE_SCHEMA` (rows slice as ``df[:k]``)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    when = np.datetime64("2013-01-01") + rng.integers(0, 364 * 86400, n).astype("timedelta64[s]")
    return pd.DataFrame(
        {
            "carrier": rng.choice(np.array(["9E", "AA", "AS"], dtype=object), n),
            "month": rng.integers(1, 13, n),
            "delay": rng.uniform(-120, 1440, n),
            "when": when,
            "client": rng.integers(0, 2**32, n),
            "ok": rng.random(n) < 0.5,
        }
    )


def _one_table_row() -> Any:
    return _table(1, seed=9)


def _bad_tables() -> list[tuple[str, Any]]:
    unknown = _table()
    unknown.loc[7, "carrier"] = "ZZ"
    late = _table()
    late.loc[3, "month"] = 13
    missing = _table().drop(columns="ok")
    return [("unknown-category", unknown), ("month-13", late), ("missing-column", missing)]


def _table_rows(data: Any) -> list[dict[str, Any]]:
    return data.to_dict("records")


def _unit_ids() -> np.ndarray:
    """Ids of 30 units, some of them repeated past max_rows, more units than the slots."""
    return np.random.default_rng(1).integers(0, 30, size=60)


def _text_ids() -> np.ndarray:
    return np.array([f"N{i}XY" for i in _unit_ids()])


def _bad_unit_ids() -> list[tuple[str, Any]]:
    return [
        ("missing", np.array([1.0, np.nan])),
        ("none", np.array(["a", None], dtype=object)),
        ("two-d", np.ones((3, 2), dtype=np.int64)),
        ("bool", np.array([True, False])),
        ("mixed-types", np.array(["a", 1], dtype=object)),
        ("fractional", np.array([1.5])),
    ]


def _with_user(table: Any, seed: int = 1) -> Any:
    """A table with a privacy unit's column ``user`` (8 users: each has several rows)."""
    out = table.copy()
    out["user"] = np.random.default_rng(seed).choice([f"u{i}" for i in range(8)], len(out))
    return out


def _unit_table() -> Any:
    return _with_user(_table())


def _one_unit_row() -> Any:
    return _with_user(_table(1, seed=9), seed=9)


def _bad_unit_tables() -> list[tuple[str, Any]]:
    no_user = _table()
    missing = _unit_table()
    missing.loc[5, "user"] = None
    bad = [(label, _with_user(t)) for label, t in _bad_tables() if hasattr(t, "copy")]
    return [*bad, ("no-unit-column", no_user), ("missing-unit", missing)]


# ------------------------------------------------------------------ the examples
def _c(name: str) -> Any:
    """The public sketchsyn name ``name``, imported when an example is built (a module that
    fails to import fails its own kinds only)."""
    return getattr(importlib.import_module("sketchsyn"), name)


def _box(d: int) -> Any:
    return _c("Box").unit(d)


def _examples() -> dict[str, Example]:
    pts = {"data": _points(), "one": _one_point(), "bad": _bad_points()}
    out: list[Example] = [
        Example(
            "CountMinSketch",
            lambda s: _c("CountMinSketch")(16, 2, 1.0, seed=7, rng=s),
            _keys,
            lambda: np.array([3], dtype=np.uint64),
            _bad_keys,
            variants={"raw": lambda s: _c("CountMinSketch")(16, 2, seed=7, rng=s)},
            merge_exact=("raw",),
        ),
        Example(
            "CountSketch",
            lambda s: _c("CountSketch")(16, 2, 1.0, seed=7, rng=s),
            _keys,
            lambda: np.array([3], dtype=np.uint64),
            _bad_keys,
            variants={"raw": lambda s: _c("CountSketch")(16, 2, seed=7, rng=s)},
            merge_exact=("raw",),
        ),
        Example(
            "PrivHP",
            lambda s: _c("PrivHP")(_box(2), 1.0, k=4, width=16, depth=5, rng=s),
            **pts,
            variants={
                "raw": lambda s: _c("PrivHP")(
                    _box(2), 1.0, k=4, width=16, depth=5, rng=s, raw=True
                ),
                "count-sketch-raw": lambda s: _c("PrivHP")(
                    _box(2), 1.0, k=4, width=16, depth=5, sketch="count-sketch", rng=s, raw=True
                ),
            },
            merge_exact=("raw", "count-sketch-raw"),
        ),
        Example(
            "PrivHP[schema]",
            lambda s: _c("PrivHP")(_schema(), 1.0, k=4, width=16, depth=9, rng=s),
            _table,
            _one_table_row,
            _bad_tables,
            items=_table_rows,
            variants={
                "raw": lambda s: _c("PrivHP")(
                    _schema(), 1.0, k=4, width=16, depth=9, rng=s, raw=True
                ),
            },
            merge_exact=("raw",),
        ),
        Example(
            "PrivHP[unit]",
            lambda s: _c("PrivHP")(
                _schema(),
                1.0,
                k=4,
                width=16,
                depth=9,
                rng=s,
                unit="user",
                max_rows=2,
                expected_units=8,
            ),
            _unit_table,
            _one_unit_row,
            _bad_unit_tables,
            items=_table_rows,
            variants={
                "raw": lambda s: _c("PrivHP")(
                    _schema(),
                    1.0,
                    k=4,
                    width=16,
                    depth=9,
                    rng=s,
                    raw=True,
                    unit="user",
                    max_rows=2,
                    bounder=_c("ContributionBounder")(2, 2, slots=2, rng=s),
                ),
            },
        ),  # fmt: skip
        Example(
            "ContributionBounder",
            lambda s: _c("ContributionBounder")(max_rows=3, buckets=8, slots=2, rng=s),
            _unit_ids,
            lambda: np.array([5]),
            _bad_unit_ids,
            variants={
                "sampled": lambda s: _c("ContributionBounder")(
                    max_rows=2, buckets=4, slots=3, fingerprint_bits=2, sample_rate=0.5, rng=s
                ),
            },
        ),
        Example(
            "ContributionBounder[text]",
            lambda s: _c("ContributionBounder")(max_rows=3, buckets=8, slots=2, rng=s),
            _text_ids,
            lambda: np.array(["N5XY"]),
            _bad_unit_ids,
        ),
        Example("PMM", lambda s: _c("PMM")(_box(2), 1.0, depth=4, rng=s), **pts, merge_exact=("",)),
        Example(
            "PSMM", lambda s: _c("PSMM")(_box(2), 1.0, depth=4, rng=s), **pts, merge_exact=("",)
        ),
        Example(
            "GridHistogram",
            lambda s: _c("GridHistogram")(_box(2), 1.0, level=4, rng=s),
            **pts,
            merge_exact=("",),
        ),
        Example(
            "AdaptiveGrid",
            lambda s: _c("AdaptiveGrid")(_box(2), 1.0, 100, level=4, rng=s),
            **pts,
            merge_exact=("",),
        ),
        Example(
            "PrivTree",
            lambda s: _c("PrivTree")(_box(2), 1.0, level=4, rng=s),
            **pts,
            merge_exact=("",),
        ),
        Example(
            "ContinualPrivHP",
            lambda s: _c("ContinualPrivHP")(
                _box(2), 1.0, k=4, width=16, horizon=64, depth=5, rng=s
            ),
            **pts,
            continual=True,
            variants={
                "binary": lambda s: _c("ContinualPrivHP")(
                    _box(2), 1.0, k=4, width=16, horizon=64, depth=5, counter="binary", rng=s
                ),
                "releases": lambda s: _c("ContinualPrivHP")(
                    _box(2), 1.0, k=4, width=16, horizon=64, depth=5, releases=8, rng=s
                ),
                "hybrid": lambda s: _c("ContinualPrivHP")(
                    _box(2), 1.0, k=4, width=16, horizon=64, depth=5, counter="hybrid", rng=s
                ),
                "honaker": lambda s: _c("ContinualPrivHP")(
                    _box(2),
                    1.0,
                    k=4,
                    width=16,
                    horizon=64,
                    depth=5,
                    counter="honaker",
                    release_every=4,
                    rng=s,
                ),
            },
        ),
        Example(
            "StreamingPrivTree",
            lambda s: _c("StreamingPrivTree")(
                _box(2), 1.0, horizon=64, releases=4, memory_bytes=4096, rng=s
            ),
            **pts,
            continual=True,
            variants={
                "steps": lambda s: _c("StreamingPrivTree")(
                    _box(2),
                    4.0,
                    horizon=64,
                    releases=2,
                    steps_per_release=3,
                    refine=1,
                    memory_bytes=2048,
                    rng=s,
                ),
            },
        ),
        Example(
            "OnlineSynthesizer",
            lambda s: _c("OnlineSynthesizer")(_box(2), 1.0, rng=s),
            **pts,
            taped=True,
            continual=True,
            fixed_nbytes=False,
        ),
        Example(
            "LowDimSynthesizer",
            lambda s: _c("LowDimSynthesizer")(_box(3), 2.0, target_dim=2, depth=4, rng=s),
            _points(3),
            _one_point(3),
            _bad_points(3),
            merge_exact=("",),
            ready=lambda s: (s.fix_subspace(), s.update_many(_points(3)())),
        ),
        Example(
            "MarginalSynthesizer",
            lambda s: _c("MarginalSynthesizer")(_box(3), 1.0, bits=2, fine_bits=3, rng=s),
            _points(3),
            _one_point(3),
            _bad_points(3),
            merge_exact=("",),
        ),
        Example(
            "MarginalSynthesizer[unit]",
            lambda s: _c("MarginalSynthesizer")(
                _schema(),
                1.0,
                bits=2,
                fine_bits=3,
                rng=s,
                unit="user",
                max_rows=2,
                expected_units=8,
            ),
            _unit_table,
            _one_unit_row,
            _bad_unit_tables,
            items=_table_rows,
        ),  # fmt: skip
        Example(
            "MarginalSynthesizer[schema]",
            lambda s: _c("MarginalSynthesizer")(_schema(), 1.0, bits=2, fine_bits=3, rng=s),
            _table,
            _one_table_row,
            _bad_tables,
            items=_table_rows,
            merge_exact=("",),
        ),
        Example(
            "BinaryMechanism",
            lambda s: _c("BinaryMechanism")(1.0, 64, rng=s),
            _steps,
            lambda: np.array([1]),
            _bad_steps,
            taped=True,
            variants={
                "unbounded-rho": lambda s: _c("BinaryMechanism")(rho=0.5, rng=s),
                "honaker": lambda s: _c("BinaryMechanism")(1.0, 64, estimator="honaker", rng=s),
            },
            base=lambda: np.array([0]),
        ),
        Example(
            "SparseCounter",
            lambda s: _c("SparseCounter")(2.0, 64, rng=s),
            _steps,
            lambda: np.array([1]),
            _bad_steps,
            taped=True,
            base=lambda: np.array([0]),
        ),
        Example(
            "KaryTreeCounter",
            lambda s: _c("KaryTreeCounter")(1.0, 64, k=5, rng=s),
            _steps,
            lambda: np.array([1]),
            _bad_steps,
            taped=True,
            base=lambda: np.array([0]),
        ),
        Example(
            "SqrtFactorizationCounter",
            lambda s: _c("SqrtFactorizationCounter")(1.0, 64, rng=s),
            _steps,
            lambda: np.array([1]),
            _bad_steps,
            taped=True,
            base=lambda: np.array([0]),
        ),
        Example(
            "InhomogeneousSparseCounter",
            lambda s: _c("InhomogeneousSparseCounter")(
                0.5, _c("online_budgets")(0.5, 2, 1), 1, rng=s
            ),
            _steps,
            lambda: np.array([1]),
            _bad_steps,
            taped=True,
            base=lambda: np.array([0]),
        ),
        Example(
            "KaryTreeBank",
            lambda s: _c("KaryTreeBank")(3, 1.0, 64, k=5, rng=s),
            _bank_steps(3),
            lambda: np.array([[1, 0, 0]]),
            _bad_bank_steps(3),
            taped=True,
            base=lambda: np.array([[0, 0, 0]]),
        ),
        Example(
            "CounterBank",
            lambda s: _c("CounterBank")(3, 1.0, 64, rng=s),
            _bank_steps(3),
            lambda: np.array([[1, 0, 0]]),
            _bad_bank_steps(3),
            taped=True,
            base=lambda: np.array([[0, 0, 0]]),
        ),
        Example(
            "InhomogeneousSparseBank",
            lambda s: _c("InhomogeneousSparseBank")(
                3, 0.5, _c("online_budgets")(0.5, 2, 1), 1, rng=s
            ),
            _bank_steps(3),
            lambda: np.array([[1, 0, 0]]),
            _bad_bank_steps(3),
            base=lambda: np.array([[0, 0, 0]]),
            fixed_nbytes=False,
        ),
        Example(
            "CumulativeSynthesizer",
            lambda s: _c("CumulativeSynthesizer")(8, 16, 1.0, rng=s),
            _bits(8, 6),
            lambda: np.array([[1, 0, 0, 0, 0, 0, 0, 0]]),
            _bad_bits(8),
            base=lambda: np.zeros((1, 8), dtype=np.int64),
            taped=True,
            fixed_nbytes=False,
        ),
        Example(
            "FixedWindowSynthesizer",
            lambda s: _c("FixedWindowSynthesizer")(8, 16, 2, 1.0, rng=s),
            _bits(8, 6),
            lambda: np.array([[1, 0, 0, 0, 0, 0, 0, 0]]),
            _bad_bits(8),
            base=lambda: np.zeros((1, 8), dtype=np.int64),
            taped=True,
            fixed_nbytes=False,
        ),
    ]

    def pmm_release(seed: int, data: Any) -> Any:
        p = _c("PMM")(_box(2), 1.0, depth=4, rng=seed)
        if data is not None:
            p.update_many(data)
        return p.release()

    def privhp_table_release(seed: int, data: Any) -> Any:
        p = _c("PrivHP")(_schema(), 1.0, k=4, width=16, depth=9, rng=seed)
        if data is not None:
            p.update_many(data)
        return p.release()

    def lowdim_release(seed: int, data: Any) -> Any:
        s = _c("LowDimSynthesizer")(_box(3), 2.0, target_dim=2, depth=4, rng=seed)
        return s.fit(data)

    def marginal_release(seed: int, data: Any) -> Any:
        s = _c("MarginalSynthesizer")(_box(3), 1.0, bits=2, fine_bits=3, rng=seed)
        if data is not None:
            s.update_many(data)
        return s.release()

    def marginal_table_release(seed: int, data: Any) -> Any:
        s = _c("MarginalSynthesizer")(_schema(), 1.0, bits=2, fine_bits=3, rng=seed)
        if data is not None:
            s.update_many(data)
        return s.release()

    def lowdim_base() -> np.ndarray:
        return np.array([[0.2, 0.4, 0.6], [0.5, 0.5, 0.1]])

    out.append(
        Example(
            "PrivateDistribution",
            None,  # type: ignore[arg-type]
            pts["data"],
            pts["one"],
            items=None,
            built=pmm_release,
        )
    )
    out.append(
        Example(
            "PrivateDistribution[schema]",
            None,  # type: ignore[arg-type]
            _table,
            _one_table_row,
            items=None,
            built=privhp_table_release,
        )
    )
    out.append(
        Example(
            "LowDimDistribution",
            None,  # type: ignore[arg-type]
            _points(3),
            lambda: np.vstack([lowdim_base(), [[0.3, 0.3, 0.3]]]),
            items=None,
            built=lowdim_release,
            base=lowdim_base,
        )
    )
    out.append(
        Example(
            "MarginalDistribution",
            None,  # type: ignore[arg-type]
            _points(3),
            _one_point(3),
            items=None,
            built=marginal_release,
        )
    )
    out.append(
        Example(
            "MarginalDistribution[schema]",
            None,  # type: ignore[arg-type]
            _table,
            _one_table_row,
            items=None,
            built=marginal_table_release,
        )
    )
    return {e.kind: e for e in out}


EXAMPLES: dict[str, Example] = _examples()
