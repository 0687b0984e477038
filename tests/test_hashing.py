"""Vectorised MurmurHash3 equals mmh3 bit for bit; key validation; the hash family."""

from __future__ import annotations

import mmh3
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsyn.errors import InputError, ParameterError
from sketchsyn.sketches.hashing import HashFamily, as_keys, murmur3_32

EXTREMES = [0, 1, 2**32 - 1, 2**32, 2**63, 2**64 - 1]
keys64 = st.one_of(st.sampled_from(EXTREMES), st.integers(0, 2**64 - 1))
seeds32 = st.integers(0, 2**32 - 1)


def reference(key: int, seed: int) -> int:
    return mmh3.hash(int(key).to_bytes(8, "little"), int(seed), signed=False)


@given(st.lists(keys64, min_size=1, max_size=40), seeds32)
def test_murmur3_equals_mmh3(keys, seed):
    got = murmur3_32(np.array(keys, dtype=np.uint64), seed)
    assert got.dtype == np.uint32
    assert got.tolist() == [reference(k, seed) for k in keys]


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=40), seeds32)
def test_murmur3_equals_mmh3_on_32_bit_keys(keys, seed):
    # Keys below 2**32 take the path that skips the (zero) high block.
    got = murmur3_32(np.array(keys, dtype=np.uint64), seed)
    assert got.tolist() == [reference(k, seed) for k in keys]


@settings(max_examples=20)
@given(st.lists(keys64, min_size=1, max_size=8), st.lists(seeds32, min_size=1, max_size=4))
def test_seed_arrays_broadcast(keys, seeds):
    k = np.array(keys, dtype=np.uint64)
    s = np.array(seeds, dtype=np.uint32)
    table = murmur3_32(k[None, :], s[:, None])
    assert table.shape == (len(seeds), len(keys))
    assert table.tolist() == [[reference(x, y) for x in keys] for y in seeds]


def test_levels_times_rows_in_one_call_including_the_blocked_path():
    # keys (L, 1, n) with seeds (L, j, 1): large enough to go through the cache-blocked loop,
    # with n not a multiple of the block size.
    rng = np.random.default_rng(0)
    levels, rows, n = 3, 2, 70_000 + 17
    keys = rng.integers(0, 2**64, size=(levels, 1, n), dtype=np.uint64)
    keys[1] >>= np.uint64(40)  # one level of small keys
    seeds = rng.integers(0, 2**32, size=(levels, rows, 1), dtype=np.uint64).astype(np.uint32)
    out = murmur3_32(keys, seeds)
    assert out.shape == (levels, rows, n)
    for lvl in range(levels):
        for r in range(rows):
            assert np.array_equal(out[lvl, r], murmur3_32(keys[lvl, 0], int(seeds[lvl, r, 0])))
    idx = rng.integers(0, n, size=200)
    for lvl, r, i in zip(idx % levels, idx % rows, idx, strict=True):
        assert int(out[lvl, r, i]) == reference(keys[lvl, 0, i], seeds[lvl, r, 0])
    # Keys along the first axis, seeds along the last.
    flipped = murmur3_32(keys[0, 0][:, None], seeds[0, :, 0])
    assert np.array_equal(flipped, out[0].T)


def test_empty_and_scalar_inputs():
    assert murmur3_32(np.zeros(0, dtype=np.uint64), 3).shape == (0,)
    assert murmur3_32(5, 3).shape == () and int(murmur3_32(5, 3)) == reference(5, 3)


@pytest.mark.parametrize(
    "bad, where",
    [
        ([1, -2, 3], r"keys\[1\] = -2"),
        (np.array([1.0, 2.5]), r"keys\[1\] = 2.5"),
        (np.array([np.nan]), r"keys\[0\] = nan"),
        (np.array([0, 1, np.inf]), r"keys\[2\] = inf"),
        (np.array([1.0, 2.0**64]), r"keys\[1\] = 1.8"),
        ([3, 2**64], r"keys\[1\] = 18446744073709551616"),
        ([0, -1, 2**63], r"keys\[1\] = -1"),
        (np.array([True, False]), r"keys\[0\] = True"),
        (np.array(["a"]), r"keys\[0\] = 'a'"),
        (np.array([1, None], dtype=object), r"keys\[1\] = None"),
    ],
)
def test_bad_keys_name_index_and_value(bad, where):
    with pytest.raises(InputError, match=where):
        as_keys(bad)
    with pytest.raises(InputError, match=where.replace("keys", "prefixes")):
        as_keys(bad, name="prefixes")


def test_keys_accepted_forms():
    assert as_keys([1, 2]).dtype == np.uint64
    assert as_keys(np.array([3.0, 4.0])).tolist() == [3, 4]
    assert as_keys(np.array([2**64 - 1], dtype=object)).tolist() == [2**64 - 1]
    assert as_keys(np.array([[1], [2]], dtype=np.int32)).shape == (2, 1)
    # A list mixing ints >= 2**63 with small ones (numpy would make it float64) stays exact.
    assert as_keys([2**63 + 1, 5]).tolist() == [2**63 + 1, 5]
    assert as_keys([0, 2**64 - 1]).tolist() == [0, 2**64 - 1]


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True])
def test_bad_seed_is_a_parameter_error(seed):
    with pytest.raises(ParameterError, match="'seed'"):
        murmur3_32([1], seed)


def test_hash_family_rows_are_distinct_and_in_range():
    for width in (1000, 1024):
        fam = HashFamily(width=width, depth=4, seed=3)
        keys = np.arange(20000, dtype=np.uint64)
        b = fam.buckets(keys)
        assert b.shape == (4, 20000) and b.dtype == np.int64
        assert b.min() >= 0 and b.max() < width
        assert (b[0] != b[1]).mean() > 0.99  # rows use different seeds
        # Roughly uniform: Poisson(20) bucket loads stay within [3, 49] (p < 1e-6 each).
        counts = np.bincount(b[0], minlength=width)
        assert counts.min() > 2 and counts.max() < 50
        flat = fam.flat_indices(keys)
        assert np.array_equal(flat, b + (np.arange(4) * width)[:, None])
    s = fam.signs(keys)
    assert s.dtype == np.int8 and set(np.unique(s)) == {-1, 1}
    assert abs(s.mean()) < 4 / np.sqrt(s.size)  # fair signs, 4 standard errors
    # Signs are independent of buckets: the mean sign within the low/high half of buckets.
    assert abs(s[0][b[0] < width // 2].mean()) < 4 / np.sqrt(s[0].size / 2)


@pytest.mark.parametrize("width", [1000, 1024, 1, 2**31])
def test_hash_family_documented_rule(width):
    fam = HashFamily(width, 2, seed=3)
    seed0, sign1 = reference(0, 3), reference(2**32 + 1, 3)
    assert int(fam.row_seeds[0]) == seed0 and int(fam.sign_seeds[1]) == sign1
    for key in (12345, 2**64 - 1):
        h = reference(key, seed0)
        assert int(fam.buckets([key])[0, 0]) == (h * width) >> 32
        hs = reference(key, sign1)
        assert int(fam.signs([key])[1, 0]) == (1 if hs % 2 == 0 else -1)


def test_hash_family_params_and_equality():
    fam = HashFamily(64, 3, 9)
    assert (fam.width, fam.depth, fam.seed) == (64, 3, 9)
    assert fam == HashFamily(64, 3, 9) and hash(fam) == hash(HashFamily(64, 3, 9))
    assert fam != HashFamily(64, 3, 8) and fam != HashFamily(32, 3, 9) and fam != "x"
    with pytest.raises(ValueError):
        fam.row_seeds[0] = 1  # read-only
    with pytest.raises(AttributeError):
        fam.width = 3  # type: ignore[misc]
    for kwargs, word in [
        (dict(width=0, depth=1), "'width'"),
        (dict(width=8, depth=0), "'depth'"),
        (dict(width=8, depth=1, seed=-1), "'seed'"),
    ]:
        with pytest.raises(ParameterError, match=word):
            HashFamily(**kwargs)


def test_string_keys():
    assert HashFamily.key_of("a") != HashFamily.key_of("b")
    assert HashFamily.key_of("x") == mmh3.hash64(b"x", 0, signed=False)[0]
    assert HashFamily.key_of("é") == HashFamily.key_of("é".encode())
    with pytest.raises(InputError, match="int 5"):
        HashFamily.key_of(5)  # type: ignore[arg-type]
