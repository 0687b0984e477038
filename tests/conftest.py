"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def client() -> Iterator[Any]:
    """One Dask ``LocalCluster`` of two worker processes for every Dask test of the session."""
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT)  # worker processes import this checkout's sketchsyn
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    cl = Client(cluster)
    try:
        assert len(set(cl.run(os.getpid).values()) - {os.getpid()}) == 2
        yield cl
    finally:
        cl.close()
        cluster.close()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
