"""Privacy audits of ContinualPrivHP's counters on neighbouring streams one deletion apart
(of a row inserted before, and of a row never inserted).

The audit of tests/test_privacy_audit.py, on the blocks that the root cell's releases at every
step determine (Honaker: the two single-step nodes the releases expose raw): ε̂ ≤ σ_0 for the
correct build, and more loss than the correct build could show for one with every noise scale
halved (the audit's power to see a 2× error). Measured (600 runs per stream, Honaker 400):
ε̂ 0.76 (binary), 1.56 (k-ary), 0.88 (Honaker) for the correct builds; 2.09 > 1.48, 3.69 > 2.22
and 2.26 > 1.48 for the halved ones. The k-ary tree bank (700 counters as 700 runs): ε̂ 1.69 ≤ 2,
and 3.19 > 2 with half the noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_privacy_audit import Mechanism, audit

import sketchsyn.privacy.accounting as accounting
from sketchsyn import Box, ContinualPrivHP, KaryTreeBank
from sketchsyn.privacy.rng import as_source


# ------------------------------------------------------------------ privacy audits
# Neighbours one deletion apart: D inserts x at steps 1 and 2 and deletes it at step 3; D' has
# an empty step 3. The root cell's releases at every step determine the blocks they use; the
# audit reads those blocks (noise Lap_Z(h/σ_0) each) and must find ε̂ ≤ σ_0, while a build with
# every scale halved must show more loss than σ_0 allows.
def _blocks(counter: str, r: np.ndarray) -> np.ndarray:
    if counter == "honaker":  # the raw nodes (0,1] = r1 and (2,3] = r3 − r2 (estimates of
        # single steps are their own noisy values); the other releases mix several nodes
        return np.array([r[0], r[2] - r[1]])
    if counter == "binary":  # (0,1], (0,2], (2,3], (0,4]
        return np.array([r[0], r[1], r[2] - r[1], r[3]])
    # k = 3, two levels: (0,1] = r1, (0,3] = r3, (2,3] = r3 − r2, (3,4] = r4 − r3
    return np.array([r[0], r[2], r[2] - r[1], r[3] - r[2]])


def _continual_mech(counter: str, inserted: bool = True) -> Mechanism:
    """D deletes x at step 3, D' has an empty step 3; steps 1 and 2 insert x (``inserted``)
    or are empty: a deletion of a row never inserted, applied like any other."""
    kw = {"kary": dict(arity=3), "honaker": dict(releases=4)}.get(counter, {})
    # Honaker's audit reads one node of three: a larger ε keeps its power to see a 2× error.
    eps = 12.0 if counter == "honaker" else 6.0
    x = np.array([[0.3]])
    c = ContinualPrivHP(
        Box.unit(1),
        eps,
        k=1,
        width=4,
        sketch_depth=1,
        depth=2,
        horizon=4,
        counter=counter,
        rng=0,
        **kw,
    )
    cells = int(c._offsets[-1])

    def build(deletes: bool, seed: int | None) -> np.ndarray:
        # One object, reset for each run (a fresh object per run costs ten times more).
        c._t, c._last = 0, None
        c._exact._tree[...] = 0
        c._exact._bank[...] = 0
        c._closed[...] = 0
        c._streams = as_source(seed).spawn(c.depth + 1)
        c._table = c._new_table(cells, c._streams)
        out = []
        for step in range(4):
            if step < 2 and inserted:
                c.update_many(x)
            elif step == 2 and deletes:
                c.remove_many(x)
            else:
                c.skip(1)
            out.append(c._exact._tree[0] if seed is None else c.cell_values(0)[0])
        return _blocks(counter, np.array(out, dtype=np.int64))

    return Mechanism(
        name=f"ContinualPrivHP-{counter}" + ("" if inserted else "-never-inserted"),
        epsilon=float(c.sigmas[0]),
        build=build,
        state=lambda y: y,
        scales=lambda y: np.full(y.size, float(c.noise_scales[0])),
        data=(True, False),
        trials=400 if counter == "honaker" else 600,
    )


@pytest.mark.parametrize("counter", ["binary", "kary", "honaker"])
def test_audit_of_one_deletion(counter: str) -> None:
    mech = _continual_mech(counter)
    eps_hat, top, _, _ = audit(mech)
    assert math.isfinite(eps_hat)
    assert eps_hat <= mech.epsilon, (eps_hat, mech.epsilon)
    # The deleted step lies in one block per level; the releases use two of the binary tree's
    # three blocks there ((2,3] and (0,4]; (2,4] is a right child) and both k-ary blocks.
    used = {"binary": 2 / 3, "kary": 1.0, "honaker": 1 / 3}[counter]
    assert top == pytest.approx(used * mech.epsilon, rel=1e-6)


@pytest.mark.parametrize("counter", ["binary", "kary", "honaker"])
def test_audit_of_one_deletion_catches_half_the_noise(counter: str, monkeypatch) -> None:
    real = accounting.laplace_scale
    monkeypatch.setattr(accounting, "laplace_scale", lambda *a, **k: real(*a, **k) / 2)
    mech = _continual_mech(counter)
    eps_hat, top, _, _ = audit(mech)
    assert eps_hat > top / 2, (eps_hat, top)


# The same audit where x was never inserted: steps 1 and 2 are empty, D deletes x at step 3
# (the root's exact count goes to −1), D' has an empty step 3. Before issue 34 the deletion was
# refused (the exact counts proved it impossible), so D could not even be built: the refusal
# told the neighbours apart. Measured (600 runs per stream): ε̂ 0.76 (binary) and 1.55 (k-ary)
# ≤ σ_0 = 2.22; with every scale halved 2.09 > 1.48 and 3.69 > 2.22 (the same draws as the
# audit above: the noise does not depend on the data).
@pytest.mark.parametrize("counter", ["binary", "kary"])
def test_audit_of_deleting_a_row_never_inserted(counter: str) -> None:
    mech = _continual_mech(counter, inserted=False)
    eps_hat, top, _, _ = audit(mech)
    assert math.isfinite(eps_hat) and eps_hat <= mech.epsilon, (eps_hat, mech.epsilon)
    used = {"binary": 2 / 3, "kary": 1.0}[counter]
    assert top == pytest.approx(used * mech.epsilon, rel=1e-6)


@pytest.mark.parametrize("counter", ["binary", "kary"])
def test_audit_of_deleting_a_row_never_inserted_catches_half_the_noise(
    counter: str, monkeypatch
) -> None:
    real = accounting.laplace_scale
    monkeypatch.setattr(accounting, "laplace_scale", lambda *a, **k: real(*a, **k) / 2)
    eps_hat, top, _, _ = audit(_continual_mech(counter, inserted=False))
    assert eps_hat > top / 2, (eps_hat, top)


# ------------------------------------------------------------------ the k-ary tree bank
# The bank's counters are independent runs of one counter: one bank of 700 counters gives the
# 700 runs of a stream at once. k = 3, T = 4: two levels, Lap_Z(2/ε) per block; D' has one more
# event at step 3, which lies in the blocks (2, 3] and (0, 3] (both read, r3 − r2 and r3).
def _bank_mech(epsilon: float) -> Mechanism:
    runs, cache = 700, {}
    streams = {True: [1, 1, 0, 0], False: [1, 1, 1, 0]}

    def build(data: bool, seed: int | None) -> np.ndarray:
        xs = np.array(streams[data], dtype=np.int64)
        if seed is None:
            return _blocks("kary", np.cumsum(xs))
        group = seed // runs
        if group not in cache:
            bank = KaryTreeBank(runs, epsilon, 4, k=3, rng=np.random.SeedSequence([group, 21]))
            cache[group] = bank.update_many(np.repeat(xs[:, None], runs, axis=1))
        return _blocks("kary", cache[group][:, seed % runs])

    probe = KaryTreeBank(1, epsilon, 4, k=3, rng=0)
    return Mechanism(
        name="KaryTreeBank",
        epsilon=2.0,
        build=build,
        state=lambda y: y,
        scales=lambda y: np.full(y.size, float(probe.scale)),
        data=(True, False),
        trials=runs,
    )


def test_audit_of_the_bank() -> None:
    mech = _bank_mech(2.0)
    eps_hat, top, _, _ = audit(mech)
    assert math.isfinite(eps_hat) and eps_hat <= mech.epsilon, eps_hat
    assert top == pytest.approx(2.0)


def test_audit_of_the_bank_catches_half_the_noise() -> None:
    mech = _bank_mech(4.0)  # built with twice the budget it claims: half the noise
    eps_hat, top, _, _ = audit(mech)
    assert eps_hat > top / 2 == pytest.approx(2.0), (eps_hat, top)
