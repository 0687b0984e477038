"""sketchsyn.dask on a LocalCluster with worker processes: exact trusted merges, private workers."""

from __future__ import annotations

import functools
import math
import os
import sys

import numpy as np
import pytest

from sketchsyn import (
    PMM,
    Box,
    CountMinSketch,
    IncompatibleError,
    ParameterError,
    PrivateDistribution,
    PrivHP,
)

pytest.importorskip("dask")
pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")

import dask.array as da  # noqa: E402
import dask.bag as db  # noqa: E402
import dask.dataframe as dd  # noqa: E402

from sketchsyn import dask as sdask  # noqa: E402

DOMAIN = Box.unit(2)
RAW = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, raw=True)
NOISY = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12)


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return np.random.default_rng(0).beta(2, 5, size=(70_000, 2))


def _exact(X: np.ndarray, make=RAW) -> PrivHP:
    one = make()
    one.update_many(X)
    return one


def _assert_same_state(merged: PrivHP, one: PrivHP) -> None:
    assert isinstance(merged, PrivHP)
    assert merged.raw and merged._tree[0] == one.n_seen  # the root counter: every row, once
    np.testing.assert_array_equal(merged._tree, one._tree)
    np.testing.assert_array_equal(merged._bank, one._bank)


def test_trusted_array_merge_equals_one_machine_exactly(client, data) -> None:
    arr = da.from_array(data, chunks=(9_000, 1))  # 8 row blocks, columns rechunked whole
    merged = sdask.fit(arr, RAW, split_every=2)  # tree: 8 -> 4 -> 2 -> 1
    _assert_same_state(merged, _exact(data))
    release = merged.release()  # the one noise draw
    assert isinstance(release, PrivateDistribution)
    assert abs(release.total - data.shape[0]) < 2_000


def test_trusted_dataframe_and_bag_merges_equal_one_machine(client, data) -> None:
    frame = pd.DataFrame({"id": np.arange(len(data)), "x": data[:, 0], "y": data[:, 1]})
    ddf = dd.from_pandas(frame, npartitions=5)
    _assert_same_state(sdask.fit(ddf, RAW, columns=["x", "y"], split_every=3), _exact(data))
    rows = [tuple(r) for r in data[:6_000]]
    bag = db.from_sequence(rows, npartitions=4)
    _assert_same_state(sdask.fit(bag, RAW, batch_size=500), _exact(data[:6_000]))


def test_trusted_offline_mechanism_and_sketch(client, data) -> None:
    make = functools.partial(PMM, DOMAIN, 1.0, depth=8)
    merged = sdask.fit(da.from_array(data, chunks=(20_000, 2)), make, split_every=2)
    one = make()
    one.update_many(data)
    np.testing.assert_array_equal(merged._counts, one._counts)
    keys = np.random.default_rng(1).integers(0, 500, size=(30_000, 1))
    cms = functools.partial(CountMinSketch, 128, 3)
    merged = sdask.fit(da.from_array(keys, chunks=(7_000, 1)), cms)
    one = cms()
    one.update_many(keys.ravel())
    np.testing.assert_array_equal(merged._table, one._table)


def _lap_var(scale: float) -> float:
    q = math.exp(-1.0 / scale)
    return 2 * q / (1 - q) ** 2


def test_untrusted_workers_each_add_their_own_noise(client, data) -> None:
    """Merged − exact is the sum of P independent draws: variance P·Var, not 1 (no noise shipped
    privately) nor P² (one shared draw)."""
    P = 6
    arr = da.from_array(data, chunks=(-(-len(data) // P), 2))
    merged = sdask.fit(arr, NOISY, mode="untrusted")
    exact = _exact(data)
    assert not merged.raw
    scales = merged.noise_scales
    L = merged.counter_depth
    ratios = []
    for level in range(L + 1):
        lo, hi = 2**level - 1, 2 ** (level + 1) - 1
        diff = (merged._tree[lo:hi] - exact._tree[lo:hi]).astype(float)
        ratios.append(diff**2 / (P * _lap_var(scales[level])))
    for i in range(merged._bank.shape[0]):
        diff = (merged._bank[i] - exact._bank[i]).astype(float).ravel()
        ratios.append(diff**2 / (P * _lap_var(scales[L + 1 + i])))
    ratio = float(np.concatenate(ratios).mean())
    assert 0.8 < ratio < 1.25, ratio


def test_modes_refuse_summaries_that_break_their_guarantee(data) -> None:
    arr = da.from_array(data[:1_000], chunks=(500, 2))
    with pytest.raises(ParameterError, match="mode='trusted' needs raw"):
        sdask.summarize(arr, NOISY)
    with pytest.raises(ParameterError, match="private before they leave"):
        sdask.summarize(arr, RAW, mode="untrusted")
    with pytest.raises(ParameterError, match="private before they leave"):
        sdask.summarize(arr, functools.partial(PMM, DOMAIN, 1.0, depth=4), mode="untrusted")
    seeded = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, rng=5)
    with pytest.raises(ParameterError, match="share one noise draw"):
        sdask.summarize(arr, seeded, mode="untrusted")
    keys = da.from_array(np.arange(1_000).reshape(-1, 1), chunks=(300, 1))
    shared = functools.partial(CountMinSketch, 64, 2, epsilon=1.0, rng=5)
    with pytest.raises(IncompatibleError, match="share a noise draw"):
        sdask.fit(keys, shared, mode="untrusted", scheduler="sync")
    with pytest.raises(ParameterError, match="'mode' parameter"):
        sdask.summarize(arr, RAW, mode="trusting")
    with pytest.raises(ParameterError, match="'split_every' parameter"):
        sdask.summarize(arr, RAW, split_every=1)
    with pytest.raises(ParameterError, match="must be a Dask DataFrame, Bag or Array"):
        sdask.summarize(data, RAW)
    with pytest.raises(ParameterError, match="must build a sketchsyn summary"):
        sdask.summarize(arr, dict)


def test_unknown_column_and_empty_partitions(data) -> None:
    frame = pd.DataFrame({"x": data[:100, 0], "y": data[:100, 1]})
    ddf = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(ParameterError, match=r"lacks: \['z'\]"):
        sdask.fit(ddf, RAW, columns=["x", "z"], scheduler="sync")
    bag = db.from_sequence([tuple(r) for r in data[:3]], npartitions=3).filter(lambda r: False)
    empty = sdask.fit(bag, RAW, scheduler="sync")
    assert not empty._tree.any() and not empty._bank.any()


def test_release_helper_runs_once_on_the_caller(data) -> None:
    arr = da.from_array(data[:5_000], chunks=(1_000, 2))
    release = sdask.release(arr, RAW, scheduler="sync")
    assert isinstance(release, PrivateDistribution)
    assert release.sample(10, rng=0).shape == (10, 2)


def _minor_faults(roomy: bool) -> int:
    """Page faults of 50 allocations of 2 MiB in this process, with or without roomy_malloc."""
    import contextlib
    import resource

    from sketchsyn.distributed import roomy_malloc

    with roomy_malloc() if roomy else contextlib.nullcontext():
        start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(50):
            block = np.ones(1 << 18)
            del block
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_workers_keep_freed_temporaries_while_summarising(client) -> None:
    """Dask starts workers with MALLOC_TRIM_THRESHOLD_ set, which maps and unmaps every array
    above 128 KiB: 512 page faults per 2 MiB temporary. While a partition is summarised the
    freed memory is reused; afterwards the worker's settings are back."""
    assert set(client.run(os.environ.get, "MALLOC_TRIM_THRESHOLD_").values()) == {"65536"}
    before, roomy, after = (client.run(_minor_faults, r) for r in (False, True, False))
    for worker in before:
        assert before[worker] > 20_000 and after[worker] > 20_000, (before, after)
        assert roomy[worker] < before[worker] / 10, (roomy, before)


def test_merged_summary_counts_every_row_in_trusted_mode_only(client, data) -> None:
    """Issue 34: "After `sketchsyn.dask.fit`, `n_seen` is 0 on the merged summary": trusted
    partition summaries cross processes with their exact diagnostics, so the merged n_seen is
    the sum (PrivHP, PMM); untrusted ones carry nothing exact, so it stays 0."""
    arr = da.from_array(data, chunks=(9_000, 2))
    assert sdask.fit(arr, RAW, split_every=2).n_seen == len(data)
    pmm = functools.partial(PMM, DOMAIN, 1.0, depth=6)
    assert sdask.fit(arr, pmm).n_seen == len(data)
    files = sdask.fit(arr, NOISY, mode="untrusted")
    assert files.n_seen == 0 and not files.raw


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_client_process_keeps_its_malloc_settings(client, data, monkeypatch) -> None:
    """The nanny leaves MALLOC_TRIM_THRESHOLD_ in this (client) process's environment, but glibc
    read its settings when this process started: summarising here must not impose the workers'
    thresholds nor trim the heap under the cluster's running threads."""
    from sketchsyn.distributed import protocol as distributed

    assert os.environ.get("MALLOC_TRIM_THRESHOLD_") == "65536"  # set by the nanny, here too
    calls = []

    class Recorder:
        def mallopt(self, *args):
            calls.append(("mallopt", args))

        def malloc_trim(self, *args):
            calls.append(("malloc_trim", args))

    monkeypatch.setattr(distributed, "_glibc", Recorder)
    arr = da.from_array(data[:5_000], chunks=(1_000, 2))
    sdask.fit(arr, RAW, scheduler="sync")  # every partition summarised in this process
    assert calls == []
