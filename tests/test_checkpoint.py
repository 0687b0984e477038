"""Checkpoints: atomic save/load of every summary and release, crash safety, the edge example."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sketchsyn import (
    PMM,
    PSMM,
    Box,
    CountMinSketch,
    CountSketch,
    GridHistogram,
    PrivateDistribution,
    PrivHP,
    SerializationError,
)
from sketchsyn.io.checkpoint import kind_of, load, save
from sketchsyn.synth.offline.histogram import LevelCounts

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _objects() -> dict[str, object]:
    X = np.random.default_rng(0).beta(2, 5, size=(5_000, 2))
    cms = CountMinSketch(128, 3, epsilon=1.0, rng=1)
    cms.update_many(np.arange(100))
    cs = CountSketch(128, 3, rng=2)
    cs.update_many(np.arange(50))
    php = PrivHP(Box.unit(2), epsilon=1.0, k=8, width=64, depth=10, rng=3)
    php.update_many(X)
    out: dict[str, object] = {"CountMinSketch": cms, "CountSketch": cs, "PrivHP": php}
    for mech in (
        PMM(Box.unit(2), epsilon=1.0, depth=4, rng=4),
        PSMM(Box.unit(2), epsilon=1.0, depth=4, rng=4),
        GridHistogram(Box.unit(2), epsilon=1.0, level=4, rng=4),
    ):
        mech.update_many(X)
        out[type(mech).__name__] = mech
    out["PrivateDistribution"] = php.snapshot().release()
    return out


@pytest.mark.parametrize(
    "name",
    [
        "CountMinSketch",
        "CountSketch",
        "PrivHP",
        "PMM",
        "PSMM",
        "GridHistogram",
        "PrivateDistribution",
    ],
)
def test_save_load_round_trip_every_kind(tmp_path: Path, name: str) -> None:
    obj = _objects()[name]
    path = tmp_path / f"{name}.sksy"
    obj.save(path)
    assert kind_of(path.read_bytes()) == name
    by_class = type(obj).load(path)
    generic = load(str(path))
    assert type(by_class) is type(obj) and type(generic) is type(obj)
    assert by_class.to_bytes() == obj.to_bytes() == generic.to_bytes()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_offline_mechanisms_load_through_their_base_class(tmp_path: Path) -> None:
    pmm = _objects()["PMM"]
    pmm.save(tmp_path / "pmm")
    assert isinstance(LevelCounts.load(tmp_path / "pmm"), PMM)


def test_load_refuses_another_class_and_bad_files(tmp_path: Path) -> None:
    objs = _objects()
    objs["CountSketch"].save(tmp_path / "cs")
    with pytest.raises(SerializationError, match="holds a CountSketch, not a CountMinSketch"):
        CountMinSketch.load(tmp_path / "cs")
    with pytest.raises(SerializationError, match="holds a CountSketch, not a PrivateDistribution"):
        PrivateDistribution.load(tmp_path / "cs")
    blob = (tmp_path / "cs").read_bytes()
    (tmp_path / "torn").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(SerializationError, match="checksum"):
        load(tmp_path / "torn")
    (tmp_path / "junk").write_bytes(b"not a sketch at all")
    with pytest.raises(SerializationError, match="not a sketchsyn blob"):
        load(tmp_path / "junk")
    from sketchsyn.io.serial import pack

    (tmp_path / "alien").write_bytes(pack("Alien", 1, {}, {}, state="trusted"))
    with pytest.raises(SerializationError, match="'Alien', which no sketchsyn class reads"):
        load(tmp_path / "alien")
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing")


def test_save_replaces_and_a_failed_save_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "state"
    a = CountMinSketch(64, 2)
    a.update(1, 5)
    save(a, path)
    a.update(1, 2)
    save(a, path)
    assert load(path).query(1) == 7

    class Broken:
        def to_bytes(self) -> bytes:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        save(Broken(), path)
    with pytest.raises(FileNotFoundError):
        save(a, tmp_path / "no-such-dir" / "state")
    assert load(path).query(1) == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


_WRITER = """
import sys
import numpy as np
from sketchsyn import CountMinSketch
from sketchsyn.io.checkpoint import save

def build(v):
    s = CountMinSketch(2**17, 4)
    s.update_many(np.arange(10_000) % (1000 + v), np.full(10_000, v + 1))
    return s

class Ready:  # bytes made once, so that the loop spends its time writing
    def __init__(self, obj):
        self.blob = obj.to_bytes()

    def to_bytes(self):
        return self.blob

mode, path = sys.argv[1], sys.argv[2]
a, b = Ready(build(0)), Ready(build(1))
save(a, path)
print("ready", flush=True)
while True:
    for obj in (b, a):
        if mode == "atomic":
            save(obj, path)
        else:  # the naive way: truncate the target, then write it
            with open(path, "wb") as f:
                f.write(obj.blob)
"""


def _build(v: int) -> CountMinSketch:
    s = CountMinSketch(2**17, 4)
    s.update_many(np.arange(10_000) % (1000 + v), np.full(10_000, v + 1))
    return s


def _kill_writers(mode: str, path: Path, kills: int, seed: int) -> list[bytes | None]:
    """Start a writer saving in a loop, SIGKILL it at a random moment, read the file; repeat."""
    rnd = random.Random(seed)
    found: list[bytes | None] = []
    for _ in range(kills):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, mode, str(path)],
            stdout=subprocess.PIPE,
            env=ENV,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            time.sleep(rnd.uniform(0.0, 0.08))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
        try:
            found.append(load(path)._table.tobytes())  # the state (bytes also hold a lineage)
        except SerializationError:
            found.append(None)  # torn
    return found


def test_killed_writer_leaves_the_old_or_the_new_file(tmp_path: Path) -> None:
    """SIGKILL a process that saves in a loop at random moments: the file always loads whole."""
    expected = {_build(0)._table.tobytes(), _build(1)._table.tobytes()}
    kills = 12
    found = _kill_writers("atomic", tmp_path / "state.sksy", kills, seed=16)
    assert all(blob in expected for blob in found)
    # Each writer's first save sweeps the temporary files of the killed writers before it: at
    # most the last kill's stray is left (test_killed_mid_save_stray_is_swept_by_the_next_save
    # shows that a kill mid-write does leave one).
    strays = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(strays) <= 1
    assert all(p.name.startswith(".state.sksy.") for p in strays)


def test_the_kill_harness_catches_a_naive_writer(tmp_path: Path) -> None:
    """Control: the same kills tear a file written in place, so the test above can fail."""
    found = _kill_writers("naive", tmp_path / "state.sksy", 6, seed=17)
    assert found.count(None) >= 2


def test_edge_collector_example_resumes_to_the_same_state() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "edge_collector.py")]
        + ["--rows", "120000", "--every", "25000"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "child 1 exit status -9" in out.stdout
    assert "resumed from edge.sksy at row 50000" in out.stdout
    assert "states identical (tree, sketches, counts): True" in out.stdout
    assert "releases identical: True" in out.stdout


def test_save_options_reach_to_bytes(tmp_path: Path) -> None:
    cms = CountMinSketch(64, 2)
    cms.update(3, 2)
    cms.save(tmp_path / "signed", key=b"shared secret")
    assert CountMinSketch.load(tmp_path / "signed", key=b"shared secret").query(3) == 2
    with pytest.raises(SerializationError, match="pass key="):
        load(tmp_path / "signed")
    php = PrivHP(Box.unit(2), epsilon=1.0, k=4, width=32, depth=6)
    php.update_many(np.full((10, 2), 0.3))
    php.save(tmp_path / "plain")
    php.save(tmp_path / "local", include_diagnostics=True)
    assert PrivHP.load(tmp_path / "plain").n_seen == 0  # exact counts stay out by default
    assert PrivHP.load(tmp_path / "local").n_seen == 10


_STALLED_WRITER = """
import os, sys, time
from sketchsyn import CountMinSketch
from sketchsyn.io.checkpoint import save

def stall(fd):
    print("writing", flush=True)
    time.sleep(60)

os.fsync = stall
save(CountMinSketch(64, 2), sys.argv[1])
"""


def _tmps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_killed_mid_save_stray_is_swept_by_the_next_save(tmp_path: Path) -> None:
    """A writer SIGKILLed between its write and its rename leaves ``.<name>.<pid>.*.tmp``; the
    next save of the same target (its writer dead) removes it."""
    path = tmp_path / "state.sksy"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STALLED_WRITER, str(path)],
        stdout=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "writing\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    strays = _tmps(tmp_path)
    assert len(strays) == 1 and strays[0].startswith(f".state.sksy.{proc.pid}.")
    assert not path.exists()
    cms = CountMinSketch(64, 2)
    cms.update(3, 2)
    save(cms, path)
    assert _tmps(tmp_path) == []
    assert CountMinSketch.load(path).query(3) == 2


class _Broken:
    def to_bytes(self) -> bytes:
        raise RuntimeError("no bytes today")


@pytest.mark.parametrize("stage", ["to_bytes", "write", "fsync", "replace"])
def test_a_failed_save_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    path = tmp_path / "state.sksy"
    old = CountMinSketch(64, 2)
    old.update(1, 4)
    save(old, path)
    obj: object = CountMinSketch(64, 2)
    if stage == "to_bytes":
        obj = _Broken()
    else:

        def fail(*args: object, **kwargs: object) -> None:
            raise OSError(f"{stage} failed")

        if stage == "write":
            real_fdopen = os.fdopen

            def fdopen(fd: int, mode: str) -> object:
                f = real_fdopen(fd, mode)
                f.write = fail  # type: ignore[method-assign]
                return f

            monkeypatch.setattr(os, "fdopen", fdopen)
        else:
            monkeypatch.setattr(os, stage, fail)
    with pytest.raises((OSError, RuntimeError)):
        save(obj, path)
    monkeypatch.undo()
    assert _tmps(tmp_path) == []
    assert CountMinSketch.load(path).query(1) == 4  # the old file is intact
