"""sketchsyn.spark on local[2]: exact trusted merges, private executors, the Dask face's refusals,
a tree of merges without RDDs, and the Python the workers run.

One SparkSession for the test session (``spark`` in conftest.py; its start-up is most of this
file's time); small data.
"""

from __future__ import annotations

import functools
import math
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
from sketchsyn.io.serial import header_of

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")

from sketchsyn import spark as sspark  # noqa: E402

DOMAIN = Box.unit(2)
RAW = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, raw=True)
NOISY = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12)
P = 6  # partitions of the test frame


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return np.random.default_rng(0).beta(2, 5, size=(60_000, 2))


@pytest.fixture(scope="module")
def frame(spark, data):
    keys = np.random.default_rng(1).integers(0, 500, size=len(data))
    pdf = pd.DataFrame({"key": keys, "x": data[:, 0], "y": data[:, 1]})
    df = spark.createDataFrame(pdf).cache()
    assert df.count() == len(data) and df.rdd.getNumPartitions() == P
    yield df
    df.unpersist()


def _exact(X: np.ndarray, make=RAW) -> PrivHP:
    one = make()
    one.update_many(X)
    return one


def _assert_same_state(merged: PrivHP, one: PrivHP) -> None:
    assert isinstance(merged, PrivHP)
    assert merged.raw and merged._tree[0] == one.n_seen  # the root counter: every row, once
    np.testing.assert_array_equal(merged._tree, one._tree)
    np.testing.assert_array_equal(merged._bank, one._bank)


def test_trusted_merge_equals_one_machine_exactly(frame, data) -> None:
    # split_every=2 on 6 partitions: a tree of depth 3, merges on the executors and the driver
    merged = sspark.fit(frame, RAW, columns=["x", "y"], split_every=2, batch_size=7_000)
    _assert_same_state(merged, _exact(data))
    release = merged.release()  # the one noise draw, on the driver
    assert isinstance(release, PrivateDistribution)
    assert abs(release.total - len(data)) < 2_000


def test_partition_summaries_are_lazy_bytes_that_say_their_privacy(frame) -> None:
    raw = sspark.summarize(frame, RAW, columns=["x", "y"])
    assert raw.columns == ["summary"]
    blobs = [bytes(r[0]) for r in raw.collect()]
    assert len(blobs) == P and {header_of(b).state for b in blobs} == {"trusted"}
    noisy = sspark.summarize(frame, NOISY, mode="untrusted", columns=["x", "y"])
    assert {header_of(bytes(r[0])).state for r in noisy.collect()} == {"private"}


def test_trusted_offline_mechanism_and_sketch(frame, data) -> None:
    make = functools.partial(PMM, DOMAIN, 1.0, depth=8)
    merged = sspark.fit(frame, make, columns=["x", "y"], split_every=2)
    np.testing.assert_array_equal(merged._counts, _exact(data, make)._counts)
    cms = functools.partial(CountMinSketch, 128, 3)
    merged = sspark.fit(frame, cms, columns=["key"])
    one = cms()
    one.update_many(np.asarray(frame.select("key").toPandas()["key"]))
    np.testing.assert_array_equal(merged._table, one._table)


def _lap_var(scale: float) -> float:
    q = math.exp(-1.0 / scale)
    return 2 * q / (1 - q) ** 2


def test_untrusted_executors_each_add_their_own_noise(frame, data) -> None:
    """Merged − exact is the sum of P independent draws: variance P·Var, not 1 (no noise shipped
    privately) nor P² (one shared draw)."""
    merged = sspark.fit(frame, NOISY, mode="untrusted", columns=["x", "y"])
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


def test_modes_refuse_summaries_that_break_their_guarantee(frame, data) -> None:
    with pytest.raises(ParameterError, match="mode='trusted' needs raw"):
        sspark.summarize(frame, NOISY)
    with pytest.raises(ParameterError, match="private before they leave"):
        sspark.summarize(frame, RAW, mode="untrusted")
    with pytest.raises(ParameterError, match="private before they leave"):
        sspark.summarize(frame, functools.partial(PMM, DOMAIN, 1.0, depth=4), mode="untrusted")
    seeded = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, rng=5)
    with pytest.raises(ParameterError, match="share one noise draw"):
        sspark.fit(frame, seeded, mode="untrusted", columns=["x", "y"])
    shared = functools.partial(CountMinSketch, 64, 2, epsilon=1.0, rng=5)
    with pytest.raises(IncompatibleError, match="share a noise draw"):
        sspark.fit(frame, shared, mode="untrusted", columns=["key"])  # merged on the driver
    with pytest.raises(ParameterError, match="'mode' parameter"):
        sspark.summarize(frame, RAW, mode="trusting")
    with pytest.raises(ParameterError, match="'split_every' parameter"):
        sspark.fit(frame, RAW, split_every=1)
    with pytest.raises(ParameterError, match="must be a Spark DataFrame"):
        sspark.summarize(data, RAW)
    with pytest.raises(ParameterError, match="must build a sketchsyn summary"):
        sspark.summarize(frame, dict)
    with pytest.raises(ParameterError, match=r"lacks: \['z'\]"):
        sspark.fit(frame, RAW, columns=["x", "z"])
    with pytest.raises(ParameterError, match="one column of keys"):
        sspark.summarize(frame, functools.partial(CountMinSketch, 64, 2), columns=["x", "y"])


def test_empty_frame_and_release_helper(frame, data) -> None:
    empty = sspark.fit(frame.filter("x < 0"), RAW, columns=["x", "y"])
    assert not empty._tree.any() and not empty._bank.any()
    release = sspark.release(frame.limit(5_000), RAW, columns=["x", "y"])
    assert isinstance(release, PrivateDistribution)
    assert release.sample(10, rng=0).shape == (10, 2)


def test_arrow_step_gathers_small_batches_and_is_exact(data) -> None:
    """summarize_arrow without Spark: Arrow batches of any size give the one-machine state."""
    X = data[:10_000]
    batches = [
        pa.RecordBatch.from_arrays(
            [pa.array(X[s : s + 700, 0]), pa.array(X[s : s + 700, 1])], ["x", "y"]
        )
        for s in range(0, len(X), 700)
    ]
    blob = sspark.summarize_arrow(iter(batches), RAW, batch_size=3_000)
    _assert_same_state(PrivHP.from_bytes(blob), _exact(X))
    with pytest.raises(ParameterError, match="'batch_size' parameter"):
        sspark.summarize_arrow(batches, RAW, batch_size=0)


def test_merges_use_dataframe_operations_only(frame, data, no_rdds, monkeypatch) -> None:
    """Issue 34: "Spark without RDDs. `sketchsyn.spark.fit` uses `RDD.treeAggregate`; Spark
    Connect and serverless Spark have no RDD API." The whole fit runs with the RDD API made to
    raise, up a tree (6 partitions, split_every=2: 6 -> 3 -> 2 summaries, the driver merges
    2), and the merged raw state is one machine's."""
    collected = []
    real = sspark._collect

    def counting(frame):
        rows = real(frame)
        collected.append(len(rows))
        return rows

    monkeypatch.setattr(sspark, "_collect", counting)
    with pytest.raises(AssertionError, match="RDD API"):
        frame.rdd  # noqa: B018 (the guard is on)
    merged = sspark.fit(frame, RAW, columns=["x", "y"], split_every=2, batch_size=7_000)
    _assert_same_state(merged, _exact(data))
    assert collected == [2]  # the driver received split_every summaries, not 6
    merged = sspark.fit(frame, RAW, columns=["x", "y"], split_every=8)  # no level: 6 rows
    _assert_same_state(merged, _exact(data))
    assert collected == [2, P]


def test_merged_summary_counts_every_row_in_trusted_mode_only(frame, data) -> None:
    """Issue 34: "After `sketchsyn.dask.fit`, `n_seen` is 0 on the merged summary" (Spark
    alike): trusted bytes keep the exact diagnostics, so n_seen is the sum over the partitions
    (PrivHP and PMM); untrusted bytes hold nothing exact, so it stays 0."""
    assert sspark.fit(frame, RAW, columns=["x", "y"], split_every=2).n_seen == len(data)
    pmm = functools.partial(PMM, DOMAIN, 1.0, depth=6)
    assert sspark.fit(frame, pmm, columns=["x", "y"]).n_seen == len(data)
    assert sspark.fit(frame, NOISY, mode="untrusted", columns=["x", "y"]).n_seen == 0


def test_workers_default_to_the_drivers_python() -> None:
    """Issue 34: "A venv that is not activated breaks Spark workers ("No module named 'mmh3'"
    inside a Java trace)": on a local master with PYSPARK_PYTHON unset the workers run the
    driver's interpreter; a set PYSPARK_PYTHON, an interpreter chosen otherwise, or a cluster
    master are left alone."""
    choose = sspark._worker_python
    venv = "/home/me/venv/bin/python"
    assert choose({}, "local[2]", "python3", venv) == venv
    assert choose({"PYSPARK_PYTHON": ""}, "local[*]", "python3", venv) == venv
    assert choose({"PYSPARK_PYTHON": "/usr/bin/python3"}, "local[2]", "python3", venv) is None
    assert choose({}, "local[2]", "/opt/py/bin/python", venv) is None  # set on the context
    assert choose({}, "local[2]", venv, venv) is None
    assert choose({}, "yarn", "python3", venv) is None
    assert choose({}, "spark://host:7077", "python3", venv) is None


def test_session_without_pyspark_python_gets_the_drivers(frame, monkeypatch) -> None:
    """The live check: a context left with pyspark's default 'python3' and PYSPARK_PYTHON
    unset runs its workers with sys.executable once sketchsyn.spark sends them a step."""
    context = frame.sparkSession.sparkContext
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.setattr(context, "pythonExec", "python3")
    sspark.summarize(frame, RAW, columns=["x", "y"])
    assert context.pythonExec == sys.executable


def test_a_worker_that_cannot_import_says_what_to_set(monkeypatch) -> None:
    class Failing:
        def collect(self):
            raise RuntimeError("Py4JJavaError: ... ModuleNotFoundError: No module named 'mmh3'")

    with pytest.raises(RuntimeError, match=r"cannot import 'mmh3'.*PYSPARK_PYTHON=") as info:
        sspark._collect(Failing())
    assert "\n" not in str(info.value)  # one line
