"""PrivHP's fast update path gives exactly the state of the reference implementation.

The reference is the update as it was before the speed work (one bincount at the deepest level
with at most n/2 cells, every deeper sketch level hashing each row's prefix, hashes from
``mmh3``-checked vectorised MurmurHash3 written in whole-array passes), copied here. The state
bytes of both are compared on random batches of several sizes (so that the per-cell and per-row
parts, the thread split and the scratch reuse all take part), depths and both sketches.
"""

from __future__ import annotations

import contextlib

import mmh3
import numpy as np
import pytest

from sketchsyn import Box, PrivHP, kernels
from sketchsyn.sketches.hashing import murmur3_32
from sketchsyn.synth import bank as bank_mod

_U32 = np.uint32


def _ref_murmur(keys: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """MurmurHash3 x86_32 of uint64 keys (8 little-endian bytes), whole-array passes."""

    def rotl(x: np.ndarray, r: int) -> np.ndarray:
        return (x << _U32(r)) | (x >> _U32(32 - r))

    def mix(k: np.ndarray) -> np.ndarray:
        k = k * _U32(0xCC9E2D51)
        k = rotl(k, 15)
        k = k * _U32(0x1B873593)
        return k

    with np.errstate(over="ignore"):
        halves = np.ascontiguousarray(keys, dtype="<u8").view("<u4").reshape(*keys.shape, 2)
        h = np.broadcast_to(seeds.astype(_U32), np.broadcast_shapes(keys.shape, seeds.shape))
        for blk in (halves[..., 0], halves[..., 1]):
            h = h ^ mix(blk.astype(_U32))
            h = rotl(h, 13)
            h = h * _U32(5) + _U32(0xE6546B64)
        h = h ^ _U32(8)
        h = h ^ (h >> _U32(16))
        h = h * _U32(0x85EBCA6B)
        h = h ^ (h >> _U32(13))
        h = h * _U32(0xC2B2AE35)
        h = h ^ (h >> _U32(16))
    return h


def _ref_sketch_cells(php: PrivHP, i: int, keys: np.ndarray, weights) -> np.ndarray:
    j, w = php._sketch_depth, php._width
    h = _ref_murmur(keys[None, :], php._row_seeds[i])
    buckets = ((h.astype(np.uint64) * np.uint64(w)) >> np.uint64(32)).astype(np.intp)
    if php._sign_seeds is not None:
        s = _ref_murmur(keys[None, :], php._sign_seeds[i])
        signs = 1.0 - 2.0 * (s & _U32(1)).astype(np.float64)
        weights = signs if weights is None else signs * weights[None, :]
    elif weights is not None:
        weights = np.broadcast_to(weights.astype(np.float64), (j, keys.size))
    out = np.empty((j, w), dtype=np.int64)
    for row in range(j):
        if weights is None:
            out[row] = np.bincount(buckets[row], minlength=w)
        else:
            out[row] = np.rint(np.bincount(buckets[row], weights=weights[row], minlength=w))
    return out


def _ref_level_counts(php: PrivHP, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The update as it was: dense up to n/2 cells, per-row hashing below."""
    r, L, n = php._depth, php._L_c, codes.size
    dense = max(L, min(r, max(n // 2, 1).bit_length() - 1))
    bank_counts = np.empty_like(php._bank)
    tree_counts = np.empty_like(php._tree)
    cells = np.bincount((codes >> np.uint64(r - dense)).astype(np.intp), minlength=2**dense)
    for level in range(dense, -1, -1):
        if level <= L:
            tree_counts[2**level - 1 : 2 ** (level + 1) - 1] = cells
        else:
            keys = np.flatnonzero(cells)
            bank_counts[level - L - 1] = _ref_sketch_cells(
                php, level - L - 1, keys.astype(np.uint64), cells[keys]
            )
        if level:
            cells = cells.reshape(-1, 2).sum(axis=1)
    for i in range(dense - L, len(php._sketches)):
        prefix = codes >> np.uint64(r - (L + 1 + i))
        bank_counts[i] = _ref_sketch_cells(php, i, prefix, None)
    return tree_counts, bank_counts


def _pair(sketch: str, depth: int, width: int, counter_depth: int) -> tuple[PrivHP, PrivHP]:
    make = dict(
        epsilon=1.0,
        k=8,
        width=width,
        sketch_depth=3,
        depth=depth,
        counter_depth=counter_depth,
        sketch=sketch,
        rng=7,
    )
    a, b = PrivHP(Box.unit(2), **make), PrivHP(Box.unit(2), **make)
    b._lineage = a._lineage  # the same identity: the saved bytes compare the counts alone
    return a, b


def _batch(rng: np.random.Generator, n: int) -> np.ndarray:
    # Half clustered (many rows per deep cell), half uniform (mostly distinct deep cells).
    hot = np.clip(rng.normal(0.3, 0.01, (n // 2, 2)), 0, 1)
    return np.concatenate([hot, rng.random((n - n // 2, 2))])


def test_reference_murmur_matches_mmh3():
    keys = np.array([0, 1, 2**32 - 1, 2**32, 2**63 + 12345, 2**64 - 1], dtype=np.uint64)
    got = _ref_murmur(keys, np.array(99, dtype=np.uint32))
    want = [mmh3.hash(int(k).to_bytes(8, "little"), 99, signed=False) for k in keys]
    assert got.tolist() == want


@pytest.mark.parametrize("path", ["numpy", "kernels"])
@pytest.mark.parametrize("sketch", ["count-min", "count-sketch"])
@pytest.mark.parametrize(
    ("depth", "width", "counter_depth"), [(18, 1364, 6), (24, 1024, 8), (40, 100, 3)]
)
def test_state_bytes_equal_reference(path, sketch, depth, width, counter_depth):
    if path == "kernels" and not kernels.enabled():
        pytest.skip(kernels.why())
    new, ref = _pair(sketch, depth, width, counter_depth)
    rng = np.random.default_rng(depth * 7 + width)
    for n in (1, 3, 1000, 40_000, 70_001):
        X = _batch(rng, n)
        if path == "numpy":
            with kernels.numpy_only():
                new.update_many(X)
        else:
            new.update_many(X)
        codes = np.asarray(ref.domain.encode(X, ref.depth), dtype=np.uint64)
        tree, bank = _ref_level_counts(ref, codes)
        ref._tree += tree
        ref._bank += bank
        ref._n_seen += n
    assert np.array_equal(new._tree, ref._tree)
    assert np.array_equal(new._bank, ref._bank)
    assert new.to_bytes() == ref.to_bytes()


@pytest.mark.parametrize("threads", [True, False])
def test_thread_split_and_dense_reach_do_not_change_the_state(threads, monkeypatch):
    """The same state with one or two threads, and whatever the per-cell reach (the numpy
    path; tests/test_privhp_kernels.py does the same for the kernels)."""
    X = _batch(np.random.default_rng(3), 50_000)
    states = []
    for ratio, max_level in ((2, 23), (1 / 64, 23), (64, 23), (2, 8)):
        monkeypatch.setattr(bank_mod, "_THREADS", threads)
        monkeypatch.setattr(bank_mod, "_DENSE_CELLS_PER_ROW", ratio)
        monkeypatch.setattr(bank_mod, "_DENSE_MAX_LEVEL", max_level)
        php, _ = _pair("count-sketch", 22, 1000, 5)
        with kernels.numpy_only():
            php.update_many(X)
            php.remove_many(X[:1000])
        states.append(php._tree.tobytes() + php._bank.tobytes())
    assert all(s == states[0] for s in states)


def test_murmur_out_argument():
    keys = np.arange(70_000, dtype=np.uint64) * np.uint64(2**33 + 1)
    seeds = np.array([[1], [2], [3]], dtype=np.uint32)
    out = np.empty((3, keys.size), dtype=np.uint32)
    got = murmur3_32(keys[None, :], seeds, out=out)
    assert got is out
    assert np.array_equal(out, _ref_murmur(keys[None, :], seeds))
    with pytest.raises(Exception, match="out"):
        murmur3_32(keys[None, :], seeds, out=np.empty((2, keys.size), dtype=np.uint32))


def test_scratch_is_not_shared_with_the_result():
    """Two updates in a row: the increments of the first are not overwritten by the second."""
    php, _ = _pair("count-min", 20, 512, 4)
    rng = np.random.default_rng(5)
    a = np.asarray(php.domain.encode(_batch(rng, 30_000), 20), dtype=np.uint64)
    b = np.asarray(php.domain.encode(_batch(rng, 30_000), 20), dtype=np.uint64)
    for path in (kernels.numpy_only, contextlib.nullcontext):
        with path():
            first = php._level_counts(a)
            copy = (first[0].copy(), first[1].copy())
            php._level_counts(b)
        assert np.array_equal(first[0], copy[0]) and np.array_equal(first[1], copy[1])


@pytest.mark.parametrize("d", [2, 3])
def test_morton_tables_give_the_codes_of_the_bit_stages(d, monkeypatch):
    """The table lookup of the encoding (axes of ≤ 12 bits) against the magic-number stages."""
    from sketchsyn.domains import box as box_mod

    rng = np.random.default_rng(d)
    lo = rng.normal(size=d)
    hi = lo + 0.1 + 5 * rng.random(d)
    for policy in ("raise", "clip", "drop"):
        box = Box(lo, hi, out_of_bounds=policy)
        X = lo + rng.random((3_000, d)) * (hi - lo)
        X[:5], X[5:10] = lo, hi  # the corners: first and last cells
        if policy != "raise":
            X[10:20] = hi + 1.0
        for depth in [*range(1, 3 * 12 + 3), 50]:
            for arr in (X, np.asfortranarray(X)):
                monkeypatch.setattr(box_mod, "_TABLE_BITS", 12)
                fast = box.encode(arr, depth, return_dropped=True)
                monkeypatch.setattr(box_mod, "_TABLE_BITS", -1)
                slow = box.encode(arr, depth, return_dropped=True)
                assert np.array_equal(fast[0], slow[0]) and fast[1] == slow[1], (policy, depth)
