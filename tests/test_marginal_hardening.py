"""Untrusted bytes of MarginalSynthesizer and MarginalDistribution (issue 34, item 2), on a Box
and on a Schema: counts range-checked so that no level sum can overflow, unknown fields and
arrays refused by name, the release's ``params`` checked field by field, and ``epsilon``
checked against the split its tables spend (exact rationals). The release that measures every
pair (a Box's) is checked here; a table's release, which chooses its pairs, in
``test_marginal_select.py``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from sketchsyn import Box, MarginalDistribution, MarginalSynthesizer, Schema
from sketchsyn.errors import IncompatibleError, InputError, ParameterError, SerializationError
from sketchsyn.io.serial import pack, read

SCHEMA = Schema(
    [
        {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
        {"name": "x", "kind": "numeric", "low": 0, "high": 1},
        {"name": "ok", "kind": "boolean"},
    ]
)
DOMAINS = {"box": Box.unit(3), "schema": SCHEMA}


def _rows(domain, n: int = 200, seed: int = 0):
    rng = np.random.default_rng(seed)
    if isinstance(domain, Box):
        return rng.random((n, 3))
    return {"c": rng.choice(["a", "b", "c"], n), "x": rng.random(n), "ok": rng.random(n) < 0.5}


def _synth(domain, seed: int = 0) -> MarginalSynthesizer:
    syn = MarginalSynthesizer(domain, 1.0, bits=2, fine_bits=3, rng=seed)
    syn.update_many(_rows(domain))
    return syn


def _forge(blob: bytes, kind: str, state: str, meta=None, arrays=None) -> bytes:
    got = read(blob, kind)
    new_meta = dict(got.meta) | (meta or {})
    new_arrays = dict(got.arrays) | (arrays or {})
    return pack(kind, got.version, new_meta, new_arrays, state=state)


def _first_cells(syn: MarginalSynthesizer) -> list[int]:
    """The position in the flat counts of each table's first cell."""
    lay = syn._layout
    return [int(o) for o in lay.pair_offsets[:-1]] + [
        lay.pair_cells + int(o) for o in lay.single_offsets[:-1]
    ]


@pytest.mark.parametrize("name", DOMAINS)
def test_synthesizer_counts_are_range_checked_on_load(name: str) -> None:
    syn = MarginalSynthesizer(DOMAINS[name], 1.0, bits=2, fine_bits=3, rng=0)
    blob = syn.to_bytes()
    kind = "MarginalSynthesizer"
    for value, why in ((2**63 - 1, "above the largest 2\\*\\*52"), (-1, "negative")):
        counts = syn._counts.copy()
        counts[0] = value
        forged = _forge(blob, kind, "trusted", arrays={"counts": counts})
        with pytest.raises(SerializationError, match=f"'counts'.*{why}"):
            MarginalSynthesizer.from_bytes(forged)
    # every count in range, but a table summing past 2**52: its level sums would overflow
    counts = syn._counts.copy()
    counts[:2] = 2**52
    forged = _forge(blob, kind, "trusted", arrays={"counts": counts})
    with pytest.raises(SerializationError, match="'counts'.*counts 9007199254740992 rows"):
        MarginalSynthesizer.from_bytes(forged)


@pytest.mark.parametrize("name", DOMAINS)
def test_the_largest_state_loads_and_refuses_more_rows(name: str) -> None:
    syn = MarginalSynthesizer(DOMAINS[name], 1.0, bits=2, fine_bits=3, rng=0)
    counts = syn._counts.copy()
    counts[_first_cells(syn)] = 2**52 - 1  # every table holds 2**52 − 1 rows
    forged = _forge(syn.to_bytes(), "MarginalSynthesizer", "trusted", arrays={"counts": counts})
    a = MarginalSynthesizer.from_bytes(forged, rng=1)
    b = MarginalSynthesizer.from_bytes(forged, rng=2)
    before = a.to_bytes()
    with pytest.raises(IncompatibleError, match="2\\*\\*52 rows"):
        a.merge(b)
    with pytest.raises(InputError, match="2\\*\\*52 rows"):
        a.update_many(_rows(DOMAINS[name], n=2))
    assert a.to_bytes() == before
    a.update_many(_rows(DOMAINS[name], n=1))  # the last row that fits
    tables = a._pair_tables() + a._single_tables()
    assert all(int(t.sum()) == 2**52 for t in tables)  # every table's total, exact
    if name == "box":  # and the roots of the PMM trees the noise is added to
        assert all(int(tree[0][0]) == 2**52 for tree in a._exact_levels())


@pytest.mark.parametrize("name", DOMAINS)
def test_synthesizer_refuses_unknown_fields_and_arrays(name: str) -> None:
    syn = _synth(DOMAINS[name])
    blob = syn.to_bytes(include_diagnostics=True)
    kind = "MarginalSynthesizer"
    cases = [
        ({"seed": 3}, None, "'seed'"),
        ({"diagnostics": {"n_seen": 1, "n_dropped": 0, "extra": 2}}, None, "'extra'"),
        (None, {"junk": np.zeros(3)}, "'junk'"),
    ]
    if name == "box":
        cases.append(({"exact_bits": 4}, None, "'exact_bits'"))
    for meta, arrays, named in cases:
        forged = _forge(blob, kind, "trusted", meta=meta, arrays=arrays)
        with pytest.raises(SerializationError, match=named):
            MarginalSynthesizer.from_bytes(forged)


@pytest.mark.parametrize("name", DOMAINS)
def test_distribution_refuses_unknown_fields_and_arrays(name: str) -> None:
    dist = _synth(DOMAINS[name]).release()
    blob = dist.to_bytes()
    kind = "MarginalDistribution"
    for meta, arrays, named in (
        ({"seed": 3}, None, "'seed'"),
        (None, {"extra": np.zeros(4, dtype=np.int64)}, "'extra'"),
    ):
        forged = _forge(blob, kind, "private", meta=meta, arrays=arrays)
        with pytest.raises(SerializationError, match=named):
            MarginalDistribution.from_bytes(forged)


@pytest.mark.parametrize("name", ["box"])
def test_distribution_counts_are_range_checked(name: str) -> None:
    dist = _synth(DOMAINS[name]).release()
    blob = dist.to_bytes()
    for array in ("pairs", "singles"):
        for value in (2**63 - 1, 2**52 + 1, -5):
            table = getattr(dist, f"_{array}").copy()
            table.reshape(-1)[0] = value
            forged = _forge(blob, "MarginalDistribution", "private", arrays={array: table})
            with pytest.raises(SerializationError, match=f"'{array}'"):
                MarginalDistribution.from_bytes(forged)
    with pytest.raises(ParameterError, match="count"):
        MarginalDistribution(
            dist.domain,
            dist.epsilon,
            dist._pairs * 0 + 2**53,
            dist._singles,
            dist._pair_epsilon,
            dist._single_epsilon,
            dist.params,
            **_sizes(dist),
        )


def _sizes(dist: MarginalDistribution) -> dict:
    if isinstance(dist.domain, Box):
        return {}
    return {"bits": dist.bits, "fine_bits": dist.fine_bits, "exact_bits": dist.exact_bits}


@pytest.mark.parametrize("name", ["box"])
def test_distribution_params_are_checked_field_by_field(name: str) -> None:
    dist = _synth(DOMAINS[name]).release()
    blob = dist.to_bytes()
    params = dist.params
    bad = [
        ({"seed": 1}, "unknown fields \\['seed'\\]"),
        ({"bits": "2"}, "'bits' must be an int"),
        ({"bits": 3}, "'bits' = 3 differs"),
        ({"fine_bits": 30}, "'fine_bits' must be an int in \\[1, 24\\]"),
        ({"singles_share": 1.5}, "'singles_share' must be a number in \\(0, 1\\)"),
        ({"singles_share": 0.5}, "'singles_share' = 0.5 is not the share"),
        ({"consistency": "median"}, "'consistency' must be"),
        ({"epsilon": 2.0}, "'epsilon' = 2.0 differs"),
        ({"epsilon": True}, "'epsilon' must be a number"),
    ]
    for change, message in bad:
        forged = _forge(blob, "MarginalDistribution", "private", meta={"params": params | change})
        with pytest.raises(SerializationError, match=message):
            MarginalDistribution.from_bytes(forged)
        with pytest.raises(ParameterError, match=message):
            MarginalDistribution(
                dist.domain,
                dist.epsilon,
                dist._pairs,
                dist._singles,
                dist._pair_epsilon,
                dist._single_epsilon,
                params | change,
                **_sizes(dist),
            )
    forged = _forge(blob, "MarginalDistribution", "private", meta={"params": ["bits"]})
    with pytest.raises(SerializationError, match="'params'"):
        MarginalDistribution.from_bytes(forged)


@pytest.mark.parametrize("name", ["box"])
def test_distribution_epsilon_is_what_its_split_spends(name: str) -> None:
    dist = _synth(DOMAINS[name]).release()
    P, d = 3, 3
    spent = P * Fraction(dist._pair_epsilon) + d * Fraction(dist._single_epsilon)
    assert spent <= Fraction(dist.epsilon) and float(spent) == pytest.approx(1.0, rel=1e-12)
    blob = dist.to_bytes()
    params = {k: v for k, v in dist.params.items() if k != "epsilon"}
    for meta in (
        {"epsilon": 0.5},  # claims less than the tables spend
        {"epsilon": 2.0},  # claims more than they spend
        {"pair_epsilon": 0.3},  # a split that spends 1.15
        {"single_epsilon": float(np.nextafter(dist._single_epsilon, 1.0)) * 1.0000001},
    ):
        forged = _forge(blob, "MarginalDistribution", "private", meta=meta | {"params": params})
        with pytest.raises(SerializationError, match="'epsilon'"):
            MarginalDistribution.from_bytes(forged)
    with pytest.raises(ParameterError, match="'epsilon' = 0.9"):
        MarginalDistribution(
            dist.domain,
            0.9,
            dist._pairs,
            dist._singles,
            dist._pair_epsilon,
            dist._single_epsilon,
            **_sizes(dist),
        )


def _as_container_2(blob: bytes) -> bytes:
    """The same blob in container version 2: no state privacy byte, a fresh checksum (what a
    forger who wants a trusted state to pass as private would write)."""
    import struct

    from sketchsyn.io.serial import _DIGEST, _digest

    body = blob[:-_DIGEST]
    old = body[:4] + struct.pack("<H", 2) + body[6:8] + body[9:]
    return old + _digest(old, None)


@pytest.mark.parametrize("cls", [MarginalSynthesizer, MarginalDistribution])
def test_a_marginal_blob_without_a_state_byte_is_refused(cls) -> None:
    """Issue 50, item 3: "The docs tell servers to refuse trusted states by the header byte,
    but versions 1–2 have none [...] A forged version-2 marginal blob loads." The marginal
    synthesizer came after container version 3: sketchsyn never wrote one without the byte."""
    from sketchsyn.io.serial import header_of

    syn = _synth(Box.unit(3))
    obj = syn if cls is MarginalSynthesizer else syn.release()
    forged = _as_container_2(obj.to_bytes())
    assert header_of(forged).container == 2 and header_of(forged).state is None
    with pytest.raises(SerializationError, match="no state privacy byte"):
        cls.from_bytes(forged)
    from sketchsyn import Box as _Box
    from sketchsyn import PrivHP

    older = PrivHP(_Box.unit(2), 1.0, 4, 16, depth=4, rng=0)  # a kind of container 2's time
    assert PrivHP.from_bytes(_as_container_2(older.to_bytes())).depth == 4
