"""Continual synthetic panels preserving fixed time window queries (Bun et al., Algorithm 1).

A panel of ``n`` people (households, devices) reports one value per period ``t = 1 … T``. Every
period from ``t = k`` on, :class:`FixedWindowSynthesizer` publishes one new column of a synthetic
panel whose ``n*`` people persist over time, such that for every pattern ``s`` of ``k``
consecutive values the number of synthetic people whose last ``k`` values equal ``s`` is close
to the true number plus a public padding ``n_pad`` (Bun, Gaboardi, Neunhoeffer and Zhang,
*Continual Release of Differentially Private Synthetic Data from Longitudinal Data
Collections*, PACMMOD 2024, Theorem 3.2).

Privacy: ρ-zCDP (Theorem 3.1), **user level**: neighbours differ in one person's whole row
(added or removed: each noisy bin then moves by at most one per period; ``n`` and ``T`` are
public). Under replace-one neighbours a row moves between two bins, so the same noise gives
``2ρ``. Each of the ``T − k + 1`` periods adds ``N_Z(0, (T − k + 1)/(2ρ))`` to every bin (exact
discrete Gaussian); everything after the noisy histogram is post-processing.

>>> import numpy as np
>>> synth = FixedWindowSynthesizer(1000, horizon=6, window=2, rho=1.0, rng=0)
>>> for t in range(6):
...     out = synth.update(np.ones(1000, dtype=int))
>>> synth.t, synth.n_pad, out.shape == (synth.n_synthetic,)
(6, 8, True)
>>> abs(synth.query((1, 1)) - 1000) <= synth.error_bound()
True
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...errors import (
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
    check_epsilon,
    check_int,
    check_memory,
)
from ...io.serial import Arrays, MetaReader
from ...io.summary import Summary
from ...privacy.accounting import zcdp_to_approx_dp
from ...privacy.lineage import Lineage
from ...privacy.noise import discrete_gaussian
from ...privacy.rng import RandomSource, RNGLike, as_source
from .assign import assign_within_groups

__all__ = ["FixedWindowSynthesizer", "as_column"]

_MAX_BINS = 2**22  # alphabet**window: noise draws and histogram entries per period
_MAX_SIGMA2 = 2**30  # the discrete Gaussian sampler's range
# Least beta: ln(q^k (T − k + 1)/beta) stays finite (q^k ≤ 2**22, T ≤ 2**31).
_MIN_BETA = 1e-300


def _bins(alphabet: int, window: int) -> int | None:
    """``alphabet**window`` when it is at most ``_MAX_BINS``, else ``None`` (computed without
    building a huge power for a huge window)."""
    if window > _MAX_BINS.bit_length():
        return None
    bins = alphabet**window
    return bins if bins <= _MAX_BINS else None


def _code_dtype(size: int) -> type:
    """Smallest unsigned dtype holding codes below ``size``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if size <= np.iinfo(dt).max + 1:
            return dt
    return np.uint64


def as_column(
    column: object, n: int, alphabet: int, owner: str, dtype: type = np.int64
) -> np.ndarray:
    """Check one period's reports: ``n`` integers in ``[0, alphabet)``; return them as ``dtype``.

    Raises :class:`InputError` naming the first bad row (NaN, non-integral, out of range) or the
    wrong length; nothing is changed by a refused column.

    >>> as_column([0, 1, 1], 3, 2, "demo").tolist()
    [0, 1, 1]
    >>> as_column([0, 2, 1], 3, 2, "demo")
    Traceback (most recent call last):
    ...
    sketchsyn.errors.InputError: demo: report 2 at row 1 is outside the alphabet [0, 2)
    """
    try:
        arr = np.asarray(column)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{owner}: the column is not an array of numbers ({exc})") from exc
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InputError(
            f"{owner}: a column must hold one report for each of the n={n} people; "
            f"got an array of shape {arr.shape}"
        )
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(f"{owner}: report {arr[row]!r} at row {row} is not a finite number")
        frac = arr != np.floor(arr)
        if frac.any():
            row = int(np.flatnonzero(frac)[0])
            raise InputError(f"{owner}: report {arr[row]!r} at row {row} is not an integer")
    elif arr.dtype.kind not in "iu":
        raise InputError(f"{owner}: reports must be integers, got dtype {arr.dtype}")
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi >= alphabet:
            row = int(np.flatnonzero((arr < 0) | (arr >= alphabet))[0])
            value = arr[row].item()
            raise InputError(
                f"{owner}: report {value!r} at row {row} is outside the alphabet [0, {alphabet})"
            )
    return arr.astype(dtype, copy=False)


def _assignment_source(src: RandomSource) -> RandomSource:
    """Randomness for choosing which synthetic people get which value.

    That choice is post-processing of released counts, so privacy never depends on it; a
    PCG64 generator seeded with 128 bits from ``src`` (the OS CSPRNG by default) is enough and
    several times faster than reading ``os.urandom`` for a million people per period.
    """
    if not src.secure:
        return src
    entropy = [int(w) for w in src.uint64(2)]
    return RandomSource(np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy))))


class _PanelCopies(Summary):
    """Bytes, copies, pickling and equality of a longitudinal synthesizer (fixed window and
    cumulative), through :class:`~sketchsyn.io.summary.Summary`.

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): it holds the real people's exact
    reports or running counts. Randomness is not saved: ``from_bytes(blob, rng)`` takes a fresh
    ``rng`` for the periods still to come. Equality compares the public parameters, ``t`` and
    the state arrays (not the lineage, the read-only flag or the randomness).
    """

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = 1
    TAKES_RNG = True
    _kind: str
    _frozen: bool
    _t: int
    _n: int
    _horizon: int
    _keep_history: bool

    @abc.abstractmethod
    def _params(self) -> dict[str, Any]:
        """The public parameters (what the constructor was given)."""

    def _open_stream(self, rng: RNGLike) -> RandomSource:
        """The noise source (after this object's lineage is drawn from it), at period 0 with no
        history, writable."""
        source = as_source(rng)
        self._lineage = Lineage.new(source, self._kind, self._params())
        self._t = 0
        self._history: list[np.ndarray] = []
        self._frozen = False
        return source

    def _copy_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The header fields and arrays every panel saves: parameters, period, read-only flag,
        lineage and the history columns kept."""
        meta = {
            **self._params(),
            "t": self._t,
            "frozen": self._frozen,
            "lineage": self._lineage.to_meta(),
        }
        return meta, {f"history{i}": h for i, h in enumerate(self._history)}

    def _check_keep_history(self, keep_history: object) -> bool:
        if not isinstance(keep_history, bool):
            raise ParameterError(
                f"The 'keep_history' parameter of {self._kind} must be a bool. "
                f"Got {keep_history!r} instead."
            )
        return keep_history

    def _check_writable(self) -> None:
        if self._frozen:
            raise ReleasedError(f"this {self._kind} is a snapshot; it is read-only")

    def _check_next_period(self) -> None:
        """Refuse a period on a snapshot or past the horizon."""
        self._check_writable()
        if self._t >= self._horizon:
            raise InputError(
                f"{self._kind}: period {self._t + 1} is past the horizon T={self._horizon}"
            )

    def _columns(self, columns: object, alphabet: int, dtype: type = np.int64) -> list[np.ndarray]:
        """Every column of a batch checked (:func:`as_column`) before any is consumed, and the
        batch within the horizon."""
        cols = list(columns)
        if self._t + len(cols) > self._horizon:
            raise InputError(
                f"{self._kind}: {len(cols)} periods from period {self._t + 1} go past the "
                f"horizon T={self._horizon}"
            )
        checked = []
        for i, col in enumerate(cols):
            try:
                checked.append(as_column(col, self._n, alphabet, self._kind, dtype))
            except InputError as exc:
                raise InputError(f"in column {i} of the batch: {exc}") from exc
        return checked

    def _check_history(self) -> None:
        if not self._keep_history:
            raise ParameterError(
                f"{self._kind} keeps no history; build it with keep_history=True or store "
                "each column returned by update()"
            )


class FixedWindowSynthesizer(_PanelCopies):
    """Algorithm 1 of Bun et al.: a synthetic panel accurate on every window of ``k`` periods.

    Every period ``t ≥ k`` the true histogram ``C^t`` of the ``q^k`` patterns of the last ``k``
    reports (``q = alphabet``; a pattern is written oldest report first, as the paper's
    suffixes) gets ``Ĉ_s = C_s + n_pad + N_Z(0, (T − k + 1)/(2ρ))`` per bin. At ``t = k`` the
    synthesizer builds ``n* = Σ Ĉ_s`` synthetic people, ``Ĉ_s`` of them with pattern ``s``
    (negative bins, probability ≤ β, are clamped to 0 and counted in :attr:`repairs`). At
    ``t > k``, for each ``z`` of ``k − 1`` values the ``P_z`` synthetic people whose last
    ``k − 1`` values are ``z`` are split into ``p_{zc} = Ĉ_{zc} + Δ_z`` with
    ``Δ_z = (P_z − Σ_c Ĉ_{zc})/q``. When ``Δ_z`` is not an integer it is rounded at random with
    mean zero: for ``q = 2`` this is the paper's ``b_z = ±½`` (one of ``p_{z0}, p_{z1}`` is
    raised by ½, the other lowered); for ``q > 2``, ``floor(Δ_z)`` is given to every ``c`` and
    the remainder ``r = P_z − Σ_c (Ĉ_{zc} + floor(Δ_z))`` goes as +1 to ``r`` values chosen
    uniformly (each value's rounding term has mean 0 and lies in ``(−1, 1)``). Which people of
    group ``z`` get value ``c`` is uniformly random (:mod:`sketchsyn.synth.longitudinal.assign`).

    For ``q > 2`` the error recursion is the paper's with ``1/q`` weights: the noise part of a
    bin's error has variance ``(1 − 1/q)σ² + Var(error)/q``, whose fixed point is again ``σ²``
    at every period, so Theorem 3.2 holds with ``2^k`` replaced by ``q^k``. We use that
    generalisation for :attr:`n_pad` and :meth:`error_bound`.

    A note on Theorem 3.2's constant: its proof states ``|B^r| ≤ ½`` for the rounding terms,
    but ``B^r`` sums one ``±½`` per generation (``2^{i−1}`` terms of weight ``2^{−i}`` at depth
    ``i``), so it is not bounded by ½; it is sub-Gaussian with variance proxy
    ``Σ_i 2^{i−1}·2^{−2i} = ½`` (Azuma: each sign is drawn after its indicator is fixed), which
    would put ``1`` instead of ``1/√2`` in the bound, and the two-sided tail adds a factor 2
    inside the logarithm. The difference is a few people for realistic ``σ``; we keep the
    paper's formula for ``n_pad`` and the bound, and the tests check its empirical
    coverage.

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the real panel's recent
    reports (exact data) next to the synthetic panel; the synthetic panels it releases are
    private.

    Parameters
    ----------
    n : int
        Number of real people (public).
    horizon : int
        ``T``, the number of periods (public).
    window : int
        ``k``, the window length, ``1 ≤ k ≤ T``.
    rho : float
        Total ρ-zCDP budget over all ``T − k + 1`` releases (user level, see above).
    beta : float
        Failure probability used to size the padding (Theorem 3.2), in ``(0, 1)``.
    alphabet : int
        ``q``, number of report values (2 for bits), ``2 ≤ q ≤ 65536``.
    rng : None, int, SeedSequence, Generator or RandomSource
        ``None`` (default) is the OS CSPRNG; a seed is for tests and is **not private** against
        whoever knows it.
    keep_history : bool
        Keep every synthetic column (memory grows with ``T``); by default each column is handed
        out by :meth:`update` and forgotten.
    max_synthetic : int
        Refuse parameters whose synthetic population ``n + 2·q^k·n_pad`` (an upper bound on
        ``n*`` except with probability β) would exceed this many people.

    Notes
    -----
    State: per real person the last ``k − 1`` reports packed into one integer (base ``q``), per
    synthetic person the same, and the ``q^k`` synthetic counts: ``O(n + n*)`` small integers
    whatever ``T``. The real people's packed reports are **exact data**: this object is a
    trusted curator's state, and so are its bytes (``STATE_PRIVACY = "trusted"``). Its outputs
    (the columns, :meth:`query`, :meth:`histogram`) are private.

    The mechanism releases at every period by design, so it has no release-once guard. A copy
    (snapshot, bytes) carries the same :class:`~sketchsyn.privacy.lineage.Lineage`; a loaded copy
    must not continue a stream that its original also continues: the two would publish independent
    noise on the same periods and spend ρ twice.
    """

    _kind = "FixedWindowSynthesizer"

    def __init__(
        self,
        n: int,
        horizon: int,
        window: int,
        rho: float,
        *,
        beta: float = 0.05,
        alphabet: int = 2,
        rng: RNGLike = None,
        keep_history: bool = False,
        max_synthetic: int = 2**31 - 1,
    ) -> None:
        name = self._kind
        self._n = check_int(n, "n", name, minimum=1, maximum=2**40)
        self._horizon = check_int(horizon, "horizon", name, minimum=1, maximum=2**31)
        self._window = check_int(window, "window", name, minimum=1, maximum=self._horizon)
        self._alphabet = check_int(alphabet, "alphabet", name, minimum=2, maximum=65536)
        self._rho = check_epsilon(rho, name, "rho")
        if (
            isinstance(beta, bool)
            or not isinstance(beta, numbers.Real)
            or not _MIN_BETA <= float(beta) < 1.0
        ):
            raise ParameterError(
                f"The 'beta' parameter of {name} must be a real number in [{_MIN_BETA:g}, 1). "
                f"Got {beta!r} instead."
            )
        self._beta = float(beta)
        self._keep_history = self._check_keep_history(keep_history)
        self._max_synthetic = check_int(max_synthetic, "max_synthetic", name, minimum=1)
        q, k = self._alphabet, self._window
        bins = _bins(q, k)
        if bins is None:
            raise ParameterError(
                f"The 'window' parameter of {name} must keep alphabet**window <= {_MAX_BINS} "
                f"histogram bins. Got window={k} with alphabet={q} instead."
            )
        self._bins = bins
        self._groups = q ** (k - 1)
        self._releases = self._horizon - k + 1
        self._sigma2 = Fraction(self._releases) / (2 * Fraction(self._rho))
        if self._sigma2 > _MAX_SIGMA2:
            raise ParameterError(
                f"The 'rho' parameter of {name} must give a noise variance "
                f"(T - k + 1)/(2 rho) <= 2**30. Got rho={rho!r} instead."
            )
        self._n_pad = math.ceil(self.error_bound())
        needed = self._n + 2 * self._bins * self._n_pad
        if needed > self._max_synthetic:
            raise ParameterError(
                f"The padding n_pad={self._n_pad} per bin over {self._bins} bins would need up "
                f"to {needed} synthetic people, more than max_synthetic={self._max_synthetic}. "
                "Raise rho, beta or max_synthetic, or lower window or alphabet."
            )
        # Codes below q^k (and q itself) fit this dtype, so arithmetic stays in it.
        self._dtype = _code_dtype(max(self._bins, self._alphabet + 1))
        item = np.dtype(self._dtype).itemsize
        check_memory(
            item * self._n + 8 * self._bins,
            name,
            f"the last reports of n={self._n} people and {self._bins} bins",
        )
        source = self._open_stream(rng)
        self._noise_src, assign = source.spawn(2)
        self._assign_src = _assignment_source(assign)
        self._real = np.zeros(self._n, dtype=self._dtype)
        self._synth = np.zeros(0, dtype=self._dtype)
        self._p = np.zeros(self._bins, dtype=np.int64)
        self._repairs = 0

    # ------------------------------------------------------------------ public parameters
    def _params(self) -> dict[str, Any]:
        return {
            "n": self._n,
            "horizon": self._horizon,
            "window": self._window,
            "rho": self._rho,
            "beta": self._beta,
            "alphabet": self._alphabet,
            "keep_history": self._keep_history,
            "max_synthetic": self._max_synthetic,
        }

    n = ReadOnly[int]("Number of real people (public).")
    horizon = ReadOnly[int]("``T``, the number of periods.")
    window = ReadOnly[int]("``k``, the window length.")
    rho = ReadOnly[float]("Total ρ-zCDP budget (user level) over all releases.")
    beta = ReadOnly[float]("Failure probability the padding is sized for.")
    alphabet = ReadOnly[int]("``q``, the number of report values.")
    keep_history = ReadOnly[bool]("Whether the full synthetic panel is kept (see :meth:`history`).")

    @property
    def sigma2(self) -> float:
        """Variance parameter of the per-bin noise, ``(T − k + 1)/(2ρ)``."""
        return float(self._sigma2)

    n_pad = ReadOnly[int]("Padding people per bin: Theorem 3.2's bound at ``beta``, rounded up.")
    t = ReadOnly[int]("Number of periods consumed so far.")

    @property
    def n_synthetic(self) -> int | None:
        """``n*``, the number of synthetic people (``None`` before period ``k``)."""
        return int(self._synth.size) if self._t >= self._window else None

    repairs = ReadOnly[int](
        "Bins whose noisy count fell below zero and was clamped (probability ≤ β overall)."
    )
    lineage = ReadOnly[Lineage]("Identity of this object's noise draws (shared by its copies).")

    def error_bound(self, beta: float | None = None) -> float:
        """Theorem 3.2's bound on ``max_{s,t} |p_s^t − (C_s^t + n_pad)|`` (in people).

        ``(sqrt((T − k + 1)/ρ) + 1/√2)·sqrt(ln(q^k (T − k + 1)/β))``, holding with probability
        at least ``1 − β`` (``beta`` defaults to the object's). Debiased counts
        (:meth:`query`) are within it of the truth; divide by ``n`` for proportions.
        """
        b = self._beta if beta is None else float(beta)
        if not 0.0 < b < 1.0:
            raise ParameterError(
                f"The 'beta' parameter of {self._kind}.error_bound must be in (0, 1). "
                f"Got {beta!r} instead."
            )
        r = self._releases
        return (math.sqrt(r / self._rho) + 1 / math.sqrt(2)) * math.sqrt(
            math.log(self._bins * r / b)
        )

    def epsilon_delta(self, delta: float) -> float:
        """ε such that the whole release is (ε, δ)-DP: ``ρ + 2·sqrt(ρ·ln(1/δ))``."""
        return zcdp_to_approx_dp(self._rho, delta)

    @property
    def nbytes(self) -> int:
        """State size in bytes: packed real and synthetic codes, the histogram, the history."""
        history = sum(int(h.nbytes) for h in self._history)
        return int(self._real.nbytes + self._synth.nbytes + self._p.nbytes) + history + 64

    # ------------------------------------------------------------------ updates
    def update(self, column: object) -> np.ndarray | None:
        """Consume the ``n`` reports of the next period; return the new synthetic output.

        Returns ``None`` before period ``k``; at period ``k`` the ``(n*, k)`` array of the
        synthetic people's first ``k`` values; afterwards the new column (length ``n*``).
        A refused column (wrong length, NaN, value outside the alphabet, past the horizon)
        leaves the state unchanged.
        """
        self._check_next_period()
        x = as_column(column, self._n, self._alphabet, self._kind, self._dtype)
        q, k = self._alphabet, self._window
        full = self._real * self._dtype(q) + x  # last min(t, k) reports, base q
        t = self._t + 1
        if t < k:
            self._real = full
            self._t = t
            return None
        counts = np.bincount(full, minlength=self._bins)
        noisy = counts + self._n_pad + discrete_gaussian(self._sigma2, self._bins, self._noise_src)
        if t == k:
            out = self._start(noisy)
        else:
            out = self._extend(noisy)
        self._real = full % self._dtype(self._groups)
        self._t = t
        if self._keep_history:
            self._history.append(out.copy())
        return out

    def update_many(self, columns: object) -> list[np.ndarray | None]:
        """Consume several periods (a ``(periods, n)`` array or a sequence of columns).

        All columns are checked first; a bad one refuses the whole batch with the state
        unchanged. Returns the outputs of :meth:`update`, one per period.
        """
        self._check_writable()
        return [self.update(c) for c in self._columns(columns, self._alphabet, self._dtype)]

    def _start(self, noisy: np.ndarray) -> np.ndarray:
        """Period ``k``: ``n*`` people, ``p_s`` with pattern ``s``, in random order."""
        p = noisy.copy()
        negative = p < 0
        self._repairs += int(negative.sum())
        p[negative] = 0
        codes = np.repeat(np.arange(self._bins, dtype=np.int64), p)
        order = np.argsort(self._assign_src.uint64(codes.size), kind="stable")
        codes = codes[order]
        self._p = p
        self._synth = (codes % self._groups).astype(self._dtype)
        q, k = self._alphabet, self._window
        powers = q ** np.arange(k - 1, -1, -1, dtype=np.int64)
        return ((codes[:, None] // powers) % q).astype(_code_dtype(q))

    def _targets(self, noisy: np.ndarray) -> np.ndarray:
        """``p_{zc}`` for every ``z``: Δ_z consistency with random mean-zero rounding."""
        q, g = self._alphabet, self._groups
        c_hat = noisy.reshape(g, q)
        previous = self._p.reshape(q, g).sum(axis=0)  # P_z = Σ_a p_{az}
        delta = previous - c_hat.sum(axis=1)
        floor = delta // q
        remainder = delta - q * floor  # in [0, q)
        targets = c_hat + floor[:, None]
        if remainder.any():
            # +1 to `remainder` values chosen uniformly (q = 2: the paper's b_z = ±½).
            ranks = np.argsort(self._assign_src.uint64(g * q).reshape(g, q), axis=1, kind="stable")
            plus = np.zeros((g, q), dtype=np.int64)
            np.put_along_axis(plus, ranks, (np.arange(q) < remainder[:, None]), axis=1)
            targets += plus
        return self._repair(targets, previous)

    def _repair(self, targets: np.ndarray, totals: np.ndarray) -> np.ndarray:
        """Clamp negative targets to 0, taking the deficit from the largest (rows keep sums)."""
        bad_rows = np.flatnonzero((targets < 0).any(axis=1))
        for z in bad_rows.tolist():
            row = targets[z]
            self._repairs += int((row < 0).sum())
            deficit = int(-row[row < 0].sum())
            row[row < 0] = 0
            while deficit > 0:
                c = int(np.argmax(row))
                take = min(deficit, int(row[c]))
                row[c] -= take
                deficit -= take
            targets[z] = row
        assert np.array_equal(targets.sum(axis=1), totals)
        return targets

    def _extend(self, noisy: np.ndarray) -> np.ndarray:
        targets = self._targets(noisy)
        values = assign_within_groups(self._synth, targets, self._assign_src)
        self._p = targets.ravel().copy()
        q, g = self._dtype(self._alphabet), self._dtype(self._groups)
        self._synth = (self._synth * q + values.astype(self._dtype, copy=False)) % g
        return values

    # ------------------------------------------------------------------ answers
    def _require_release(self) -> None:
        if self._t < self._window:
            raise InputError(
                f"{self._kind}: no synthetic data yet; the first release is at period "
                f"window={self._window} and {self._t} periods were consumed"
            )

    def histogram(self, debias: bool = True) -> np.ndarray:
        """Synthetic counts of the ``q^k`` patterns of the last ``k`` periods.

        An int64 array of shape ``(q,) * k`` indexed by the pattern, oldest value first
        (``h[1, 0, 1]``). With ``debias`` the padding ``n_pad`` is subtracted from every bin,
        so each entry estimates the true count (it may be negative).
        """
        self._require_release()
        h = self._p.reshape((self._alphabet,) * self._window).copy()
        return h - self._n_pad if debias else h

    def query(
        self,
        pattern: Sequence[int | None],
        debias: bool = True,
        proportion: bool = False,
    ) -> float:
        """How many people's last ``len(pattern)`` reports equal ``pattern`` (oldest first).

        A pattern shorter than the window marginalises over the earlier periods; ``None`` in a
        position means any value. The answer is read from the synthetic panel; with
        ``debias`` the padding's share (``n_pad`` times the number of width-``k`` patterns the
        query covers) is subtracted. With ``proportion`` the answer is divided by ``n``
        (debiased) or by ``n*`` (raw synthetic proportion).
        """
        self._require_release()
        q, k = self._alphabet, self._window
        if isinstance(pattern, (str, bytes)) or not isinstance(pattern, Sequence):
            raise ParameterError(
                f"The 'pattern' parameter of {self._kind}.query must be a sequence of ints or "
                f"None. Got {pattern!r} instead."
            )
        if not 1 <= len(pattern) <= k:
            raise ParameterError(
                f"The 'pattern' parameter of {self._kind}.query must have 1 to window={k} "
                f"entries. Got {pattern!r} instead."
            )
        index: list[Any] = [slice(None)] * (k - len(pattern))
        covered = q ** (k - len(pattern))
        for v in pattern:
            if v is None:
                index.append(slice(None))
                covered *= q
            elif isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= v < q:
                index.append(int(v))
            else:
                raise ParameterError(
                    f"The 'pattern' parameter of {self._kind}.query must hold ints in "
                    f"[0, {q}) or None. Got {pattern!r} instead."
                )
        count = int(self._p.reshape((q,) * k)[tuple(index)].sum())
        if debias:
            count -= covered * self._n_pad
            return count / self._n if proportion else count
        return count / self._synth.size if proportion else count

    def history(self) -> np.ndarray:
        """The full synthetic panel so far, ``(n*, t)`` (only with ``keep_history=True``)."""
        self._check_history()
        self._require_release()
        return np.column_stack(self._history)

    # ------------------------------------------------------------------ copies and bytes
    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The public parameters, the lineage, the period, ``repairs``, the synthetic codes and
        counts, the history if kept, and **the real people's last ``k − 1`` reports (exact
        data: a trusted curator's state; keep these bytes as private as the data)**.
        Randomness is not saved: :meth:`from_bytes` takes a fresh ``rng``.

        >>> s = FixedWindowSynthesizer(10, 4, 2, 1.0, rng=1)
        >>> _ = s.update([0, 1] * 5)
        >>> FixedWindowSynthesizer.from_bytes(s.to_bytes()) == s
        True
        """
        meta, history = self._copy_state()
        meta["repairs"] = self._repairs
        return meta, {"real": self._real, "synth": self._synth, "p": self._p, **history}

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> FixedWindowSynthesizer:
        """Check every field and array against the parameters, then build; ``rng`` drives the
        periods still to come."""
        n = fields.int("n", minimum=1, maximum=2**40)
        horizon = fields.int("horizon", minimum=1, maximum=2**31)
        window = fields.int("window", minimum=1, maximum=horizon)
        alphabet = fields.int("alphabet", minimum=2, maximum=65536)
        rho = fields.epsilon("rho")
        beta = fields.float("beta", minimum=_MIN_BETA, maximum=1.0)
        if beta >= 1.0:
            raise SerializationError(
                f"{cls._kind} blob header field 'beta' must be a number in "
                f"[{_MIN_BETA:g}, 1), got {beta!r}"
            )
        keep_history = fields.bool("keep_history")
        max_synthetic = fields.int("max_synthetic", minimum=1, maximum=2**62)
        t = fields.int("t", minimum=0, maximum=horizon)
        repairs = fields.int("repairs", minimum=0, maximum=2**62)
        frozen = fields.bool("frozen")
        lineage = fields.lineage()
        bins = _bins(alphabet, window)
        if bins is None:
            raise SerializationError(
                f"{cls._kind} blob header fields 'alphabet'={alphabet} and 'window'={window} "
                f"give more than {_MAX_BINS} bins"
            )
        groups = bins // alphabet
        dtype = _code_dtype(max(bins, alphabet + 1))
        # The arrays first: their sizes are bounded by the blob, the header's are not.
        real = fields.array(arrays, "real", dtype, (n,))
        p = fields.array(arrays, "p", np.int64, (bins,))
        synth = arrays.get("synth")
        if synth is None or synth.dtype != np.dtype(dtype) or synth.ndim != 1:
            raise SerializationError(f"{cls._kind} blob array 'synth' must be 1-D {dtype}")
        synth = fields.array(arrays, "synth", dtype, synth.shape)
        started = t >= window
        n_hist = t - window + 1 if keep_history and started else 0
        names = {"real", "synth", "p"} | {f"history{i}" for i in range(n_hist)}
        if set(arrays) != names:
            raise SerializationError(
                f"{cls._kind} blob holds arrays {sorted(arrays)[:8]}, expected {len(names)}: "
                "real, synth, p and one history column per released period"
            )
        if (
            (real.size and int(real.max()) >= groups)
            or (synth.size and int(synth.max()) >= groups)
            or (p.size and (int(p.min()) < 0 or int(p.max()) > synth.size))  # no int64 sum wraps
            or int(p.sum()) != synth.size
            or (not started and synth.size)
        ):
            raise SerializationError(
                f"{cls._kind} blob arrays 'real', 'synth' and 'p' do not agree with each other "
                f"or with the header fields (alphabet**window = {groups} groups)"
            )
        history = []
        for i in range(n_hist):
            shape = (synth.size, window) if i == 0 else (synth.size,)
            h = arrays[f"history{i}"]
            if (
                h.shape != shape
                or h.dtype.kind not in "iu"
                or (h.size and (int(h.max()) >= alphabet or int(h.min()) < 0))
            ):
                raise SerializationError(
                    f"{cls._kind} blob array 'history{i}' must hold {shape} reports in [0, "
                    f"{alphabet}), got {h.dtype}{list(h.shape)}"
                )
            history.append(fields.array(arrays, f"history{i}", h.dtype, shape))
        fields.done(arrays)  # no header field or array the class does not write
        obj = cls(
            n,
            horizon,
            window,
            rho,
            beta=beta,
            alphabet=alphabet,
            rng=rng,
            keep_history=keep_history,
            max_synthetic=max_synthetic,
        )
        if started and synth.size > max(obj._max_synthetic, n + 2 * bins * obj._n_pad):
            raise SerializationError(f"{cls._kind} blob has more synthetic people than allowed")
        obj._t, obj._repairs, obj._lineage = t, repairs, lineage
        obj._real, obj._synth, obj._p, obj._history = real, synth, p, history
        obj._frozen = frozen
        return obj

    def __repr__(self) -> str:
        return (
            f"{self._kind}(n={self._n}, horizon={self._horizon}, window={self._window}, "
            f"rho={self._rho:g}, alphabet={self._alphabet}, t={self._t})"
        )
