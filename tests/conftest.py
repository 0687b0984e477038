"""Fixtures shared by several test modules: one Dask cluster and one Spark session per test run,
each shut down deterministically (its threads and processes gone) before the run ends."""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Some images set PYTHONDONTWRITEBYTECODE=1; then every Python process the CLI and docs tests
# start compiles sketchsyn's modules again (about 0.25 CPU-s each, a quarter of those tests'
# CPU). The test run keeps bytecode as Python does by default (in __pycache__, ignored by git).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# One BLAS thread per process, as the command line runs (sketchsyn/__main__.py): the suite runs
# one pytest-xdist worker per core, and a BLAS pool of one thread per core in each (they spin
# while they wait) cost the 2-core CI about 20 CPU-s. Set before the workers start, so that
# their numpy reads it; a value set by the caller is kept.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_name, "1")


def _with_root_on_path() -> dict[str, str | None]:
    """Put this checkout first on PYTHONPATH (worker processes import this sketchsyn); returns
    the saved values of the variables the fixtures change."""
    saved = {"PYTHONPATH": os.environ.get("PYTHONPATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved["PYTHONPATH"]]))
    return saved


def _restore(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


_DASK_THREADS = re.compile(r"IO loop|AsyncProcess|QueueFeederThread|Dask|TCP-Executor")


def _join_threads(threads: set[threading.Thread], timeout: float = 30.0) -> list[str]:
    """Wait until ``threads`` and every thread a Dask cluster names as its own have ended (but
    distributed's offload executor, one idle thread for the life of the process); the names of
    any left running."""
    deadline = time.monotonic() + timeout

    def running() -> list[threading.Thread]:
        named = {t for t in threading.enumerate() if _DASK_THREADS.search(t.name)}
        return [
            t
            for t in threads | named
            if t.is_alive()
            and t is not threading.current_thread()
            and not t.name.startswith("Dask-Offload")
        ]

    for thread in running():
        thread.join(max(0.0, deadline - time.monotonic()))
    return sorted(t.name for t in running())


class _Shared:
    """A resource shared by the tests of a session (a Dask cluster, a Spark session): started
    by the first test that asks for it, shut down right after the last test that uses it (not
    at the end of the session: no thread or process of it runs during unrelated tests)."""

    def __init__(self, name: str, start: Any) -> None:
        self.name, self._start = name, start
        self.value: Any = None
        self._stop: Any = None
        self.last: str | None = None  # node id of the test after which it is shut down

    def get(self) -> Any:
        if self.value is None:
            self.value, self._stop = self._start()
        return self.value

    def shutdown(self) -> None:
        stop, self.value, self._stop = self._stop, None, None
        if stop is not None:
            stop()


def _start_dask() -> tuple[Any, Any]:
    import dask
    from distributed import Client, LocalCluster

    saved = _with_root_on_path()
    before = set(threading.enumerate())
    # The nanny sets these for its workers in this process's environment too (from its event
    # loop's thread): they are put back once the cluster and its threads are gone.
    spawn_env = dask.config.get("distributed.nanny.pre-spawn-environ")
    saved |= {k: os.environ.get(k) for k in spawn_env}
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    cl = Client(cluster)
    started = set(threading.enumerate()) - before

    def stop() -> None:
        cl.close(timeout=30)
        cluster.close(timeout=30)
        left = _join_threads(started)
        _restore(saved)  # with no thread of the cluster left to read the environment
        assert not left, f"threads of the Dask cluster still running: {left}"

    try:
        assert len(set(cl.run(os.getpid).values()) - {os.getpid()}) == 2
    except BaseException:
        stop()
        raise
    return cl, stop


def _stop_with_jvm(session: Any) -> None:
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
        proc.wait(timeout=30)
    SparkContext._gateway = None
    SparkContext._jvm = None


# A short-lived test JVM: quick start-up over peak speed (both Spark sessions).
QUICK_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def java_missing() -> bool:
    return shutil.which("java") is None and not os.environ.get("JAVA_HOME")


def _start_spark() -> tuple[Any, Any]:
    from pyspark.sql import SparkSession

    SHARED["spark_connect"].shutdown()  # one JVM at a time in this process
    saved = _with_root_on_path() | {"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON")}
    # The executors' Python workers run this interpreter (and import this checkout).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sketchsyn-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "6")  # createDataFrame's partitions: no shuffle
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.extraJavaOptions", QUICK_JVM)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")

    def stop() -> None:
        _stop_with_jvm(session)
        _restore(saved)

    return session, stop


def _port_taken(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _start_spark_connect() -> tuple[Any, Any]:
    """A Spark Connect session on a local server: ``SparkSession.builder.remote("local[2]")``
    (pyspark 4 ships the Connect server). This process runs one JVM at a time: the classic
    session, if running, is stopped first (it starts again when a test asks for it)."""
    from pyspark.sql import SparkSession

    SHARED["spark"].shutdown()
    before = dict(os.environ)  # pyspark marks this process as a Connect client in its environment
    _with_root_on_path()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    if _port_taken(15002):  # another local Connect server (another test run on this machine)
        os.environ["SPARK_TESTING"] = "1"  # pyspark's own switch: the server takes a free port
    session = (
        SparkSession.builder.remote("local[2]")
        .appName("sketchsyn-tests-connect")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", QUICK_JVM)
        .getOrCreate()
    )

    def stop() -> None:
        _stop_with_jvm(session)
        for key in set(os.environ) - set(before):
            os.environ.pop(key, None)
        os.environ.update(before)

    return session, stop


SHARED = {
    "client": _Shared("client", _start_dask),
    "spark": _Shared("spark", _start_spark),
    "spark_connect": _Shared("spark_connect", _start_spark_connect),
}


class _Groups:
    """Under pytest-xdist (``--dist loadgroup``), the tests of one shared resource run in one
    worker: one Dask cluster and one Spark JVM per run, not one per worker; and the tests of a
    module that share a module-scoped fixture (a fit, a fuzz run) run in one worker, which
    computes it once. (A plugin object: its hook runs before xdist's, which reads the groups.)"""

    # The groups are marked as each item is collected: pytest-xdist's worker reads them in its
    # own pytest_collection_modifyitems, which runs before a conftest's, tryfirst or not (the
    # groups were ignored, and each worker started its own Spark JVM).
    @pytest.hookimpl(tryfirst=True)
    def pytest_itemcollected(self, item: pytest.Item) -> None:
        names = getattr(item, "fixturenames", ())
        shared = [name for name in SHARED if name in names]
        if shared:
            group = "spark" if shared[0] == "spark_connect" else shared[0]
            item.add_marker(pytest.mark.xdist_group(group))
        elif _module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # One Spark JVM at a time, each started once: the Spark Connect tests run in the
        # classic session's worker, after every classic one (a stable sort keeps the rest).
        items.sort(key=lambda item: "spark_connect" in getattr(item, "fixturenames", ()))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """On a pytest-xdist worker with ``--dist loadgroup``, every grouped test's id must carry
        its group (``…@spark``): otherwise the scheduler ignores the groups and each worker
        starts its own Spark JVM and Dask cluster (pytest 9 with pytest-xdist 3.8 did)."""
        if not session.config.getoption("loadgroup", False):
            return
        lost = [
            item.nodeid
            for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid
        ]
        if lost:
            raise pytest.UsageError(
                f"pytest-xdist ignores the test groups with this pytest ({lost[0]} has none): "
                'install the versions the "test" extra pins'
            )


def _module_fixture(item: pytest.Item) -> bool:
    """True when ``item`` uses a module-scoped fixture (computed once per worker that runs a
    test of the module)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope == "module" for group in defs for d in group)
    for defs in info.name2fixturedefs.values():
        for fixturedef in defs:
            if fixturedef.scope == "module" and fixturedef.argname not in info.initialnames[:0]:
                return True
    return False


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Groups(), "sketchsyn-xdist-groups")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Note, after any deselection, the last test of the last module that uses each shared
    resource (its module-scoped fixtures, which may use it, end with that module)."""
    for name, shared in SHARED.items():
        users = [item.path for item in items if name in getattr(item, "fixturenames", ())]
        if users:
            shared.last = [item.nodeid for item in items if item.path == users[-1]][-1]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    # Not at ``nextitem is None``: under pytest-xdist that is the end of each chunk of work a
    # worker is sent, and a Spark JVM stopped there is started again for the next chunk (about
    # 20 CPU-s each time). The session's end stops whatever is left (pytest_sessionfinish).
    for shared in SHARED.values():
        if shared.last == item.nodeid:
            shared.shutdown()


def pytest_sessionfinish() -> None:
    for shared in SHARED.values():
        shared.shutdown()


@pytest.fixture(scope="session")
def client() -> Any:
    """One Dask ``LocalCluster`` of two worker processes for every Dask test of the session.

    Closed right after the last test that uses it: the client and the cluster closed, every
    worker process gone, every thread it started in this process ended, and the variables the
    nanny set in this process's environment put back."""
    pytest.importorskip("distributed")
    return SHARED["client"].get()


@pytest.fixture(scope="session")
def spark() -> Any:
    """One ``local[2]`` SparkSession for every Spark test of the session (its start-up is most
    of their time), stopped with its JVM right after the last test that uses it."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if java_missing():
        pytest.skip("pyspark needs a Java runtime (java on PATH or JAVA_HOME)")
    return SHARED["spark"].get()


@pytest.fixture(scope="session")
def spark_connect() -> Any:
    """One Spark Connect session (``remote("local[2]")``, pyspark 4 with its ``connect``
    extra) for the Connect tests, stopped with its server's JVM after the last of them."""
    pyspark = pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if int(pyspark.__version__.split(".")[0]) < 4:
        pytest.skip("Spark Connect's local server needs pyspark 4")
    pytest.importorskip("grpc")  # the connect extra
    if java_missing():
        pytest.skip("pyspark needs a Java runtime (java on PATH or JAVA_HOME)")
    return SHARED["spark_connect"].get()


@pytest.fixture
def no_rdds(monkeypatch) -> None:
    """Every entry point of pyspark's RDD API raises in this process while the test runs:
    ``DataFrame.rdd``, any RDD object, and the SparkContext methods that make one (Spark
    Connect and serverless sessions have none of them)."""
    from pyspark import RDD, SparkContext

    try:  # pyspark 4: the classic DataFrame, beside Spark Connect's
        from pyspark.sql.classic.dataframe import DataFrame
    except ImportError:  # pyspark 3.5
        from pyspark.sql import DataFrame

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the RDD API was used")

    monkeypatch.setattr(DataFrame, "rdd", property(refuse))
    monkeypatch.setattr(RDD, "__init__", refuse)
    for name in ("parallelize", "range", "emptyRDD", "union", "textFile", "binaryFiles"):
        monkeypatch.setattr(SparkContext, name, refuse)
