"""Continual synthetic panels preserving cumulative time queries (Bun et al., Algorithm 2).

Each of ``n`` people reports one bit per period ``t = 1 … T``. Every period,
:class:`CumulativeSynthesizer` publishes one new bit for each of ``n`` synthetic people so that,
for every ``b`` and ``t``, the number of synthetic people with at least ``b`` ones among their
first ``t`` bits is close to the true number ``S_b^t`` (Bun, Gaboardi, Neunhoeffer and Zhang,
PACMMOD 2024, Theorems 4.1 and 4.4).

Privacy: ρ-zCDP (Theorem 4.1), **user level**: neighbours differ in one person's whole row
(added or removed). For each ``b`` a person's row adds one to exactly one entry of the stream
``z_b^t = #{i : w_i^{t−1} = b − 1 and x_i^t = 1}`` (the period they reach ``b`` ones), so
neighbouring panels give neighbouring streams for every counter, and the ``T`` counters, with
``Σ_b ρ_b = ρ``, compose to ρ. Under replace-one neighbours each stream changes in two entries
of opposite sign; for counters whose noise is added to a non-negative linear image of the
stream (the binary tree, the square-root factorization) this at most doubles the squared
sensitivity, so the same noise gives ``2ρ``.

>>> import numpy as np
>>> synth = CumulativeSynthesizer(500, horizon=8, rho=1.0, rng=0)
>>> for t in range(8):
...     col = synth.update(np.ones(500, dtype=int))
>>> counts = [synth.query(b) for b in range(10)]
>>> counts == sorted(counts, reverse=True) and counts[0] == 500 and counts[9] == 0
True
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...errors import (
    ParameterError,
    SerializationError,
    check_choice,
    check_epsilon,
    check_int,
    check_memory,
)
from ...io.serial import Arrays, MetaReader
from ...privacy.accounting import zcdp_to_approx_dp
from ...privacy.lineage import Lineage
from ...privacy.rng import RNGLike
from .assign import assign_within_groups
from .fixed_window import _assignment_source, _PanelCopies, as_column

__all__ = ["CumulativeSynthesizer", "available_counters", "counter_budgets", "monotonize"]

_COUNTERS = {"tree": "BinaryMechanism", "sqrt": "SqrtFactorizationCounter"}


def _counter_class(kind: str) -> Any:
    """The stream counter class of :mod:`sketchsyn.counters` named by ``counter=``."""
    from ... import counters

    return getattr(counters, _COUNTERS[kind])


def available_counters() -> list[str]:
    """The ``counter=`` values whose stream counter :mod:`sketchsyn.counters` provides."""
    from ... import counters

    return [kind for kind, name in _COUNTERS.items() if hasattr(counters, name)]


def counter_budgets(rho: float, horizon: int) -> list[Fraction]:
    """Corollary B.1's split of ρ over the ``T`` counters, as exact fractions summing to ρ.

    ``ρ_b = ρ·L_b³ / Σ_b' L_b'³`` with ``L_b = max(ceil(log2(T − b + 1)), 1)``: it equalises
    the counters' worst-case error bounds (counter ``b`` runs for ``T − b + 1`` periods).

    Examples
    --------
    >>> [str(r) for r in counter_budgets(1.0, 4)]
    ['4/9', '4/9', '1/18', '1/18']
    """
    # ceil(log2(m)) for integers without float error: (m - 1).bit_length().
    levels = [max((horizon - b).bit_length(), 1) for b in range(1, horizon + 1)]
    total = sum(level**3 for level in levels)
    share = {level: Fraction(rho) * level**3 / total for level in set(levels)}
    return [share[level] for level in levels]


def monotonize(noisy: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Lemma 4.2's monotonisation of one period's noisy counts.

    ``previous`` holds ``Ŝ_0^{t−1} … Ŝ_{t−1}^{t−1}`` (``Ŝ_0 = n``), ``noisy`` holds the
    counters' ``S̃_1^t … S̃_t^t``. Returns ``Ŝ_0^t … Ŝ_t^t`` with
    ``Ŝ_b^t = min(max(S̃_b^t, Ŝ_b^{t−1}), Ŝ_{b−1}^{t−1})`` (``Ŝ_t^{t−1} = 0``), so counts never
    decrease in ``t`` and ``Ŝ_b^t ≤ Ŝ_{b−1}^{t−1}`` (nobody gains two ones in a period). It never
    increases the ℓ∞ error (Lemma 4.2).

    Examples
    --------
    >>> monotonize(np.array([7, 2]), np.array([5, 3])).tolist()
    [5, 5, 2]
    """
    previous = np.asarray(previous, dtype=np.int64)
    below = np.append(previous[1:], 0)  # Ŝ_b^{t−1} for b = 1 … t
    out = np.minimum(np.maximum(np.asarray(noisy, dtype=np.int64), below), previous)
    return np.concatenate([previous[:1], out])


def _weight_dtype(horizon: int) -> type:
    return np.uint8 if horizon < 256 else (np.uint16 if horizon < 65536 else np.uint32)


class CumulativeSynthesizer(_PanelCopies):
    """Algorithm 2 of Bun et al.: a synthetic panel accurate on every "at least b ones by t".

    Counter ``b`` (``b = 1 … T``) is a continual-release stream counter of
    :mod:`sketchsyn.counters.tree` with horizon ``T − b + 1`` and budget ``ρ_b`` of Corollary B.1
    (:func:`counter_budgets`); it starts at period ``b``, the first period anyone can reach
    ``b`` ones, and is fed ``z_b^t``, the number of people with ``b − 1`` ones before ``t`` and a
    one at ``t``. Its running sums ``S̃_b^t`` estimate ``S_b^t``, the number with at least ``b``
    ones by ``t``; :func:`monotonize` makes them consistent (Lemma 4.2) into ``Ŝ_b^t``; then
    ``ẑ_b^t = Ŝ_b^t − Ŝ_b^{t−1}`` synthetic people chosen uniformly among those with ``b − 1``
    ones get a one, the rest of them a zero. The synthetic panel has ``n`` people and its counts
    are exactly ``Ŝ``.

    ``counter="tree"`` is the paper's binary tree (:class:`sketchsyn.counters.tree.BinaryMechanism`
    with discrete Gaussian noise); ``counter="sqrt"`` is the square-root factorization of the
    counting matrix (:class:`sketchsyn.counters.factorization.SqrtFactorizationCounter`: smaller
    error by a
    constant, ``O(T)`` state per counter; its float estimates are rounded, post-processing).

    On Algorithm 3's noise: the tree over ``T`` leaves has ``floor(log2 T) + 1`` levels and
    each leaf lies under one node per level, so a neighbouring stream changes
    ``floor(log2 T) + 1`` node sums by one; ρ-zCDP needs ``(floor(log2 T) + 1)/(2ρ)`` per node.
    The seed's ``log T/(2ρ)`` is too small (it gives ``ρ·(floor(log2 T) + 1)/log2 T``, and no
    noise at all when ``T = 1``). Our counters use the level count; only the split of ρ over
    the counters follows Corollary B.1's ``L_b`` (any split summing to ρ is private).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the real panel's reports and
    the counters' open sums; the synthetic panels it releases are private.

    Parameters
    ----------
    n : int
        Number of real (and synthetic) people (public).
    horizon : int
        ``T``, the number of periods (public).
    rho : float
        Total ρ-zCDP budget (user level) over all releases.
    counter : {"tree", "sqrt"}
        The stream counter (see :func:`available_counters`).
    rng : None, int, SeedSequence, Generator or RandomSource
        ``None`` (default) is the OS CSPRNG; a seed is for tests and **not private**.
    keep_history : bool
        Keep every synthetic column (memory grows with ``T``).

    Notes
    -----
    State: the real people's running counts (**exact data**: a trusted curator's state, and so
    are its bytes: ``STATE_PRIVACY = "trusted"``), the synthetic people's counts, ``Ŝ``
    (``T + 1`` integers) and the counters (``O(T log T)`` numbers in all): ``O(n + T log T)``
    whatever the number of periods so far.
    The mechanism releases at every period by design (no release-once guard); a loaded copy
    must not continue a stream its original also continues (that would spend ρ twice).
    """

    _kind = "CumulativeSynthesizer"

    def __init__(
        self,
        n: int,
        horizon: int,
        rho: float,
        *,
        counter: str = "tree",
        rng: RNGLike = None,
        keep_history: bool = False,
    ) -> None:
        name = self._kind
        self._n = check_int(n, "n", name, minimum=1, maximum=2**40)
        self._horizon = check_int(horizon, "horizon", name, minimum=1, maximum=2**20)
        self._rho = check_epsilon(rho, name, "rho")
        self._counter = check_choice(counter, "counter", name, tuple(available_counters()))
        self._keep_history = self._check_keep_history(keep_history)
        check_memory(
            2 * self._n * np.dtype(_weight_dtype(self._horizon)).itemsize,
            name,
            f"the running counts of n={self._n} real and synthetic people",
        )
        self._budgets = counter_budgets(self._rho, self._horizon)
        source = self._open_stream(rng)
        self._sources = source.spawn(self._horizon + 1)
        self._assign_src = _assignment_source(self._sources[-1])
        self._counters: list[Any] = []  # counter b is built at period b
        dtype = _weight_dtype(self._horizon)
        self._real = np.zeros(self._n, dtype=dtype)
        self._synth = np.zeros(self._n, dtype=dtype)
        self._s_hat = np.array([self._n], dtype=np.int64)  # Ŝ_0 … Ŝ_t

    def _params(self) -> dict[str, Any]:
        return {
            "n": self._n,
            "horizon": self._horizon,
            "rho": self._rho,
            "counter": self._counter,
            "keep_history": self._keep_history,
        }

    def _make_counter(self, b: int) -> Any:
        cls = _counter_class(self._counter)
        return cls(
            horizon=self._horizon - b + 1,
            rho=float(self._budgets[b - 1]),
            rng=self._sources[b - 1],
        )

    # ------------------------------------------------------------------ parameters
    n = ReadOnly[int]("Number of real and synthetic people.")
    horizon = ReadOnly[int]("``T``, the number of periods.")
    rho = ReadOnly[float]("Total ρ-zCDP budget (user level).")
    counter = ReadOnly[str]('Stream counter kind (``"tree"`` or ``"sqrt"``).')

    @property
    def rhos(self) -> list[float]:
        """``ρ_1 … ρ_T`` (Corollary B.1); they sum to ρ."""
        return [float(r) for r in self._budgets]

    t = ReadOnly[int]("Number of periods consumed.")
    lineage = ReadOnly[Lineage]("Identity of this object's noise draws (shared by its copies).")
    keep_history = ReadOnly[bool]("Whether the full synthetic panel is kept.")

    def epsilon_delta(self, delta: float) -> float:
        """ε such that the whole release is (ε, δ)-DP: ``ρ + 2·sqrt(ρ·ln(1/δ))``."""
        return zcdp_to_approx_dp(self._rho, delta)

    def error_bound(self, beta: float = 0.05) -> float:
        """A bound on ``max_{b,t} |Ŝ_b^t − S_b^t|`` (people) holding with probability ``1 − β``.

        Theorem 4.4 with each counter's Gaussian tail: counter ``b``'s error at its step ``s``
        is sub-Gaussian with variance proxy ``V_b(s)`` (its ``variance(s)``), so a union bound
        over the ``T(T + 1)/2`` pairs ``(b, t)`` gives
        ``max_{b,s} sqrt(2·V_b(s)·ln(T(T + 1)/β))``; Lemma 4.2 carries it to ``Ŝ``.
        """
        if not 0.0 < float(beta) < 1.0:
            raise ParameterError(
                f"The 'beta' parameter of {self._kind}.error_bound must be in (0, 1). "
                f"Got {beta!r} instead."
            )
        pairs = self._horizon * (self._horizon + 1)
        worst = 0.0
        for b in range(1, self._horizon + 1):
            probe = (
                self._counters[b - 1]
                if b <= len(self._counters)
                else _counter_class(self._counter)(
                    horizon=self._horizon - b + 1, rho=float(self._budgets[b - 1]), rng=0
                )
            )
            worst = max(worst, max(probe.variance(s) for s in range(1, self._horizon - b + 2)))
        return math.sqrt(2.0 * worst * math.log(pairs / float(beta)))

    @property
    def nbytes(self) -> int:
        """State size in bytes: running counts, ``Ŝ``, the counters, the history if kept."""
        counters = sum(int(c.nbytes) for c in self._counters)
        history = sum(int(h.nbytes) for h in self._history)
        return int(self._real.nbytes + self._synth.nbytes + self._s_hat.nbytes) + (
            counters + history + 64
        )

    # ------------------------------------------------------------------ updates
    def update(self, column: object) -> np.ndarray:
        """Consume the ``n`` bits of the next period; return the new synthetic column.

        A refused column (wrong length, NaN, a value other than 0/1, past the horizon) leaves
        the state unchanged.
        """
        self._check_next_period()
        x = as_column(column, self._n, 2, self._kind)
        t = self._t + 1
        # z_b^t for b = 1 … t: people with b − 1 ones so far and a one now.
        z = np.bincount(self._real[x == 1], minlength=t)[:t]
        self._counters.append(self._make_counter(t))
        noisy = np.array(
            # The factorization releases float estimates: rounded (post-processing).
            [round(float(self._counters[b].update(int(z[b])))) for b in range(t)],
            dtype=np.int64,
        )
        s_hat = monotonize(noisy, self._s_hat)
        ones = s_hat[1:] - np.append(self._s_hat[1:], 0)  # ẑ_b^t, b = 1 … t
        group_sizes = self._s_hat - np.append(self._s_hat[1:], 0)  # synthetic with b − 1 ones
        targets = np.stack([group_sizes - ones, ones], axis=1)
        column_out = assign_within_groups(self._synth, targets, self._assign_src)
        self._synth = (self._synth + column_out).astype(self._synth.dtype)
        self._real = (self._real + x).astype(self._real.dtype)
        self._s_hat = s_hat
        self._t = t
        if self._keep_history:
            self._history.append(column_out.copy())
        return column_out

    def update_many(self, columns: object) -> list[np.ndarray]:
        """Consume several periods; all columns are checked first (a bad one refuses all)."""
        return [self.update(c) for c in self._columns(columns, 2)]

    # ------------------------------------------------------------------ answers
    def query(self, b: int, proportion: bool = False) -> float:
        """Synthetic people with at least ``b`` ones so far (the monotone counts ``Ŝ_b^t``).

        ``b = 0`` is everyone; ``b > t`` is nobody. With ``proportion`` divided by ``n``.
        """
        b = check_int(b, "b", f"{self._kind}.query", minimum=0)
        count = int(self._s_hat[b]) if b < self._s_hat.size else 0
        return count / self._n if proportion else count

    def counts(self) -> np.ndarray:
        """``Ŝ_0^t … Ŝ_t^t`` (int64), non-increasing in ``b``."""
        return self._s_hat.copy()

    def weights(self) -> np.ndarray:
        """Each synthetic person's number of ones so far (published information)."""
        return self._synth.astype(np.int64)

    def history(self) -> np.ndarray:
        """The full synthetic panel ``(n, t)`` (only with ``keep_history=True``)."""
        self._check_history()
        if not self._history:
            return np.zeros((self._n, 0), dtype=np.uint8)
        return np.column_stack(self._history)

    # ------------------------------------------------------------------ copies and bytes
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The public parameters, the lineage, ``Ŝ``, the synthetic counts, each counter's own
        bytes, the history if kept, and **the real people's running counts (exact data: a
        trusted curator's state)**. Randomness is not saved: :meth:`from_bytes` takes a fresh
        ``rng`` for the counters built later.

        >>> s = CumulativeSynthesizer(10, 4, 1.0, rng=1)
        >>> _ = s.update([0, 1] * 5)
        >>> CumulativeSynthesizer.from_bytes(s.to_bytes()) == s
        True
        """
        meta, history = self._copy_state()
        arrays = {"real": self._real, "synth": self._synth, "s_hat": self._s_hat}
        for b, c in enumerate(self._counters):
            arrays[f"counter{b}"] = np.frombuffer(c.to_bytes(), dtype=np.uint8)
        return meta, arrays | history

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> CumulativeSynthesizer:
        """Check every field, array and counter against the parameters before anything is
        allocated from the header; ``rng`` drives the counters built later."""
        n = fields.int("n", minimum=1, maximum=2**40)
        horizon = fields.int("horizon", minimum=1, maximum=2**20)
        rho = fields.epsilon("rho")
        counter = fields.str("counter", tuple(available_counters()))
        keep_history = fields.bool("keep_history")
        t = fields.int("t", minimum=0, maximum=horizon)
        frozen = fields.bool("frozen")
        lineage = fields.lineage()
        n_hist = t if keep_history else 0
        names = {"real", "synth", "s_hat"} | {f"counter{b}" for b in range(t)}
        names |= {f"history{i}" for i in range(n_hist)}
        if set(arrays) != names:
            raise SerializationError(
                f"{cls._kind} blob holds arrays {sorted(arrays)[:8]}, expected real, synth, "
                f"s_hat, t={t} counters and {n_hist} history columns"
            )
        # The arrays first (their sizes are bounded by the blob; n and horizon are not).
        dtype = _weight_dtype(horizon)
        real = fields.array(arrays, "real", dtype, (n,))
        synth = fields.array(arrays, "synth", dtype, (n,))
        s_hat = fields.array(arrays, "s_hat", np.int64, (t + 1,))
        if (
            (n and (int(real.max()) > t or int(synth.max()) > t))
            or int(s_hat[0]) != n
            or (np.diff(s_hat) > 0).any()
            or not np.array_equal(
                np.bincount(synth, minlength=t + 1)[::-1].cumsum()[::-1][: t + 1], s_hat
            )
        ):
            raise SerializationError(
                f"{cls._kind} blob arrays 'real', 'synth' and 's_hat' do not agree with each "
                f"other or with the header fields n={n}, t={t}"
            )
        history = []
        for i in range(n_hist):
            h = arrays[f"history{i}"]
            bad = h.dtype.kind not in "iu" or (h.size and (int(h.max()) > 1 or int(h.min()) < 0))
            if h.shape != (n,) or bad:
                raise SerializationError(
                    f"{cls._kind} blob array 'history{i}' must hold n={n} bits, got "
                    f"{h.dtype}{list(h.shape)}"
                )
            history.append(fields.array(arrays, f"history{i}", h.dtype, (n,)))
        budgets = counter_budgets(rho, horizon) if t else []
        kind = _counter_class(counter)
        counters = []
        for b in range(t):
            c = fields.nested(arrays, f"counter{b}", kind)
            if c.horizon != horizon - b or c.t != t - b or c.rho != float(budgets[b]):
                raise SerializationError(
                    f"{cls._kind} blob array 'counter{b}' has horizon {c.horizon}, step {c.t} "
                    f"and rho {c.rho}; expected {horizon - b}, {t - b} and {float(budgets[b])}"
                )
            counters.append(c)
        fields.done(arrays)  # no header field or array the class does not write
        obj = cls(n, horizon, rho, counter=counter, rng=rng, keep_history=keep_history)
        obj._t, obj._lineage = t, lineage
        obj._real, obj._synth, obj._s_hat = real, synth, s_hat
        obj._counters, obj._history = counters, history
        obj._frozen = frozen
        return obj

    def __repr__(self) -> str:
        return (
            f"{self._kind}(n={self._n}, horizon={self._horizon}, rho={self._rho:g}, "
            f"counter={self._counter!r}, t={self._t})"
        )
