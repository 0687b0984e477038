"""One generic module: every streaming summary goes through the same protocol checks.

Each entry of SUMMARIES is a small adapter saying how to build the summary (``make``), draw a
valid batch (``batch(rng)``), make a batch with one bad item in the middle (``bad_batch()``) and
read its state as a comparable value (``state(obj)``). A new summary joins by appending an entry;
``mergeable_raw`` says whether two summaries of the same (noise-free) parameters merge exactly.

The protocol: ``update_many`` equals item-by-item ``update``; merging two raw summaries equals
the summary of the concatenated stream; ``snapshot``, ``to_bytes``/``from_bytes`` and pickle
round-trip the state, a snapshot is an independent read-only copy, damaged bytes are refused;
a refused batch leaves the state exactly as it was; ``nbytes`` is fixed at construction.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sketchsyn import Box, CountMinSketch, CountSketch, PrivHP
from sketchsyn.counters import tree as counters
from sketchsyn.counters.karytree import KaryTreeCounter
from sketchsyn.counters.sparsebank import InhomogeneousSparseBank
from sketchsyn.counters.tree import (
    BinaryMechanism,
    CounterBank,
    InhomogeneousSparseCounter,
    SparseCounter,
    SqrtFactorizationCounter,
    online_budgets,
)
from sketchsyn.errors import InputError, ReleasedError, SerializationError
from sketchsyn.io.serial import unpack
from sketchsyn.synth.distribution import PrivateDistribution

DATA = Path(__file__).parent / "data"


@dataclass
class Entry:
    name: str
    make: Callable[[], Any]
    batch: Callable[[np.random.Generator], Any]
    bad_batch: Callable[[], Any]
    state: Callable[[Any], tuple]
    mergeable_raw: bool = True
    # Continual counters draw noise as they step; batch and item-by-item draw the same noise in
    # the same order of each stream, but the exact sampler's word consumption depends on how
    # many values one call draws. ``taped`` replaces the sampler with a deterministic tape per
    # seeded stream, so that the comparison is exact (the law of the noise is tested in
    # tests/test_counters.py).
    taped: bool = False
    # ``nbytes`` fixed at construction; False for a state that grows by design (the sparse bank
    # adds a tree for each counter that closes a segment; the formula is tested with it).
    fixed_nbytes: bool = True


# ------------------------------------------------------------------ adapters
def _keys(rng: np.random.Generator) -> np.ndarray:
    return rng.zipf(1.3, size=300).astype(np.uint64)


def _bad_keys() -> np.ndarray:
    keys = _keys(np.random.default_rng(99)).astype(np.int64)
    keys[150] = -3  # one bad item in the middle of an otherwise valid batch
    return keys


def _points(rng: np.random.Generator) -> np.ndarray:
    return rng.beta(2, 5, size=(300, 2))


def _bad_points() -> np.ndarray:
    points = _points(np.random.default_rng(99))
    points[150, 1] = np.nan
    return points


def _sketch_state(s: Any) -> tuple:
    return (s.table.tobytes(), s.epsilon, s.width, s.depth, s.seed)


def _php_state(p: Any) -> tuple:
    # The noisy state only: the exact n_seen stays in memory and is not in the bytes.
    return (p._tree.tobytes(), p._bank.tobytes(), p.raw)


def _sketch_entries(cls: type) -> list[Entry]:
    name = cls.__name__
    return [
        Entry(f"{name}-raw", lambda: cls(64, 3, seed=2), _keys, _bad_keys, _sketch_state),
        Entry(
            f"{name}-private",
            lambda: cls(64, 3, epsilon=1.0, seed=2, rng=5),
            _keys,
            _bad_keys,
            _sketch_state,
            mergeable_raw=False,
        ),
    ]


def _steps(rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, 3, size=300)


def _bad_steps() -> np.ndarray:
    steps = _steps(np.random.default_rng(99))
    steps[150] = -1
    return steps


def _strip_lineage(meta: dict) -> dict:
    """The header without lineages (object identities, not state), nested blobs decoded."""
    out = {}
    for key, value in meta.items():
        if key in ("lineage", "frozen"):
            continue
        if isinstance(value, str) and value.startswith(b"SKSY".hex()):
            blob = bytes.fromhex(value)
            kind = blob[9 : 9 + blob[8]].decode()
            _, _, inner, arrays = unpack(blob, kind)
            value = [_strip_lineage(inner), [a.tobytes().hex() for a in arrays.values()]]
        out[key] = value
    return out


def _counter_state(c: Any) -> tuple:
    kind, _, meta, arrays = unpack(c.to_bytes(), type(c).__name__)
    return (
        kind,
        json.dumps(_strip_lineage(meta), sort_keys=True),
        *(a.tobytes() for a in arrays.values()),
    )


def _tape(kind: str, param: Any, n: int, src: Any) -> np.ndarray:
    """Deterministic noise: the i-th draw of a seeded stream is a fixed function of the stream's
    seed, spawn key and i."""
    seq = src._gen.bit_generator.seed_seq
    key = (repr(seq.entropy), tuple(seq.spawn_key))
    start, _ = _TAPE_POS.get(id(src), (0, src))  # positions per stream object (kept alive so
    _TAPE_POS[id(src)] = (start + n, src)  # that its id is not reused), values per seed
    mix = hash(key) % 1_000_003
    i = np.arange(start, start + n, dtype=np.int64)
    return (i * 7919 + mix) % 41 - 20


_TAPE_POS: dict = {}


def _counter_entries() -> list[Entry]:
    makers = {
        "BinaryMechanism-finite": lambda: BinaryMechanism(epsilon=1.0, horizon=2000, rng=4),
        "BinaryMechanism-unbounded-rho": lambda: BinaryMechanism(rho=0.5, rng=4),
        "BinaryMechanism-honaker": lambda: BinaryMechanism(
            epsilon=1.0, horizon=2000, estimator="honaker", rng=4
        ),
        "SparseCounter": lambda: SparseCounter(2.0, 2000, rng=4),
        "KaryTreeCounter": lambda: KaryTreeCounter(1.0, 2000, k=5, rng=4),
        "SqrtFactorizationCounter": lambda: SqrtFactorizationCounter(1.0, 2000, rng=4),
        "InhomogeneousSparseCounter": lambda: InhomogeneousSparseCounter(
            0.5, online_budgets(0.5, 2, 1), start_level=1, rng=4
        ),
    }
    entries = [
        Entry(name, make, _steps, _bad_steps, _counter_state, mergeable_raw=False, taped=True)
        for name, make in makers.items()
    ]

    def bank_steps(rng: np.random.Generator) -> np.ndarray:
        return rng.integers(0, 3, size=(300, 3))

    def bad_bank_steps() -> np.ndarray:
        steps = bank_steps(np.random.default_rng(99))
        steps[150, 1] = -1
        return steps

    entries.append(
        Entry(
            "CounterBank",
            lambda: CounterBank(3, epsilon=1.0, horizon=1000, rng=4),
            bank_steps,
            bad_bank_steps,
            _counter_state,
            mergeable_raw=False,
            taped=True,
        )
    )
    # The bank steps each step alike whatever the batching, so it compares exactly untaped.
    entries.append(
        Entry(
            "InhomogeneousSparseBank",
            lambda: InhomogeneousSparseBank(
                3, 0.5, online_budgets(0.5, 2, 1), start_level=1, rng=4
            ),
            bank_steps,
            bad_bank_steps,
            _counter_state,
            mergeable_raw=False,
            fixed_nbytes=False,
        )
    )
    return entries


SUMMARIES = [
    *_sketch_entries(CountMinSketch),
    *_sketch_entries(CountSketch),
    Entry(
        "PrivHP-raw",
        lambda: PrivHP(Box.unit(2), 1.0, k=8, width=32, depth=10, rng=3, raw=True),
        _points,
        _bad_points,
        _php_state,
    ),
    Entry(
        "PrivHP-private",
        lambda: PrivHP(Box.unit(2), 1.0, k=8, width=32, depth=10, rng=3),
        _points,
        _bad_points,
        _php_state,
        mergeable_raw=False,
    ),
    Entry(
        "PrivHP-count-sketch",
        lambda: PrivHP(
            Box.unit(2), 1.0, k=4, width=32, depth=9, sketch="count-sketch", rng=3, raw=True
        ),
        _points,
        _bad_points,
        _php_state,
    ),
    *_counter_entries(),
]
IDS = [e.name for e in SUMMARIES]


# ------------------------------------------------------------------ the protocol
@pytest.mark.parametrize("entry", SUMMARIES, ids=IDS)
def test_update_many_equals_item_by_item(entry, monkeypatch):
    if entry.taped:
        _TAPE_POS.clear()
        monkeypatch.setattr(counters, "_draw", _tape)
    batch = entry.batch(np.random.default_rng(1))
    a, b, c = entry.make(), entry.make(), entry.make()
    a.update_many(batch)
    for item in batch:
        b.update(item)
    c.update_many(batch[:100])  # batches split anywhere give the same state
    c.update_many(batch[100:])
    assert entry.state(a) == entry.state(b) == entry.state(c)
    assert entry.state(a) != entry.state(entry.make())  # the batch did change the state


@pytest.mark.parametrize("entry", [e for e in SUMMARIES if e.mergeable_raw], ids=lambda e: e.name)
def test_merge_equals_concatenated_stream(entry):
    rng = np.random.default_rng(2)
    x, y = entry.batch(rng), entry.batch(rng)
    a, b, whole = entry.make(), entry.make(), entry.make()
    a.update_many(x)
    b.update_many(y)
    whole.update_many(np.concatenate([x, y]))
    a.merge(b)
    assert entry.state(a) == entry.state(whole)


@pytest.mark.parametrize("entry", SUMMARIES, ids=IDS)
def test_snapshot_bytes_and_pickle_round_trip(entry):
    s = entry.make()
    s.update_many(entry.batch(np.random.default_rng(3)))
    snap = s.snapshot()
    assert entry.state(snap) == entry.state(s)
    with pytest.raises(ReleasedError):
        snap.update_many(entry.batch(np.random.default_rng(7)))
    back = type(s).from_bytes(s.to_bytes())
    assert entry.state(back) == entry.state(s)
    assert entry.state(pickle.loads(pickle.dumps(s))) == entry.state(s)
    s.update_many(entry.batch(np.random.default_rng(4)))
    assert entry.state(snap) != entry.state(s)  # the snapshot is a copy, not a view
    blob = bytearray(s.to_bytes())
    blob[len(blob) // 3] ^= 0x10
    with pytest.raises(SerializationError):
        type(s).from_bytes(bytes(blob))
    with pytest.raises(SerializationError):
        type(s).from_bytes(s.to_bytes()[:-5])


@pytest.mark.parametrize("entry", SUMMARIES, ids=IDS)
def test_refused_batch_leaves_state_unchanged(entry):
    s = entry.make()
    s.update_many(entry.batch(np.random.default_rng(5)))
    before = entry.state(s)
    with pytest.raises(InputError):
        s.update_many(entry.bad_batch())
    assert entry.state(s) == before
    s.update_many(entry.batch(np.random.default_rng(6)))  # still usable afterwards
    assert entry.state(s) != before


@pytest.mark.parametrize("entry", SUMMARIES, ids=IDS)
def test_state_size_is_reported_and_fixed(entry):
    s = entry.make()
    size = s.nbytes
    assert isinstance(size, int) and size > 0
    s.update_many(entry.batch(np.random.default_rng(6)))
    assert isinstance(s.nbytes, int) and (s.nbytes == size or not entry.fixed_nbytes)


# ------------------------------------------------------------------ format version 1 stays readable
# The blobs and their answers were written once by tests/data/make_reference_blobs.py; they pin
# what format version 1 decodes to, whatever later releases change in the samplers.
ANSWERS = json.loads((DATA / "reference_answers_v1.json").read_text())


@pytest.mark.parametrize("cls", [CountMinSketch, CountSketch])
def test_reference_sketch_blobs_still_load(cls):
    s = cls.from_bytes((DATA / f"{cls.__name__}_v1.bin").read_bytes())
    want = ANSWERS[cls.__name__]
    assert np.asarray(s.query_many(want["keys"])).tolist() == want["answers"]
    assert int(s.table.sum()) == want["table_sum"]
    assert s.epsilon == 1.0 and s.width == 64 and s.depth == 3 and s.seed == 5


def test_reference_privhp_and_release_blobs_still_load():
    php = PrivHP.from_bytes((DATA / "PrivHP_v1.bin").read_bytes())
    want = ANSWERS["PrivHP"]
    assert php.n_seen == want["n_seen"] and php._tree.tolist() == want["tree"]
    assert int(php._bank.sum()) == want["bank_sum"]
    assert (php.k, php.width, php.depth, php.epsilon) == (8, 32, 8, 1.0)
    dist = PrivateDistribution.from_bytes((DATA / "PrivateDistribution_v1.bin").read_bytes())
    want = ANSWERS["PrivateDistribution"]
    assert dist.total == want["total"] and dist.leaves().count.size == want["n_leaves"]
    assert dist.count([0, 0], [0.5, 1.0]) == pytest.approx(want["count_half"])
