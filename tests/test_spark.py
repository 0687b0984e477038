"""sketchsyn.spark on local[2]: exact trusted merges, private executors, the Dask face's refusals.

One SparkSession for the module (its start-up is most of this file's time); small data.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import sys
from pathlib import Path

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
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("pyspark needs a Java runtime (java on PATH or JAVA_HOME)", allow_module_level=True)

from sketchsyn import spark as sspark  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DOMAIN = Box.unit(2)
RAW = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12, raw=True)
NOISY = functools.partial(PrivHP, DOMAIN, 1.0, 16, 256, depth=12)
P = 6  # partitions of the test frame


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYSPARK_PYTHON")}
    # The executors' Python workers import this checkout's sketchsyn with this interpreter.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved["PYTHONPATH"]]))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sketchsyn-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", str(P))  # createDataFrame's partitions: no shuffle
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # A short-lived test JVM: quick start-up matters more than peak speed.
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        _stop_with_jvm(session)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _stop_with_jvm(session) -> None:
    """Stop the session and the JVM pyspark started for it (its memory is not held for the rest
    of the test run): the JVM exits when the pipe to its stdin closes."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    session.stop()
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    gateway.shutdown()
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except Exception:  # noqa: BLE001 (still running: this process started it, so end it)
        proc.kill()
    SparkContext._gateway = None
    SparkContext._jvm = None


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
    # n_seen is not compared: a summary crosses processes as to_bytes() without diagnostics.
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


def test_docs_page_example_runs(spark) -> None:
    page = (ROOT / "docs" / "spark.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S)
    assert code is not None
    scope: dict = {}
    exec(compile(code.group(1), "docs/spark.md", "exec"), scope)
    assert isinstance(scope["release"], PrivateDistribution)
    assert scope["merged"]._tree[0] == 200_000
