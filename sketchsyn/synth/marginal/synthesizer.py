"""One-pass marginal synthesizer: a PMM tree per pair of columns and per column, then a tree of
pairs (Chow–Liu) sampled from the consistent noisy marginals.

In one pass over the rows, :class:`MarginalSynthesizer` keeps the exact counts of

* every **pair** of columns ``(i, j)``, ``i < j``, on a ``2**bits × 2**bits`` grid of the unit
  square (Morton order of a 2-D :class:`~sketchsyn.domains.Box`: level 1 halves column ``i``);
* every **single** column on a ``2**fine_bits`` grid (``fine_bits ≥ bits``).

At ``release()`` each of these ``P + d`` tables (``P = d(d − 1)/2``) becomes one PMM tree (He's
dissertation, Algorithms 3–4): every cell of every level of the dyadic tree above the grid gets
integer Laplace noise with PMM's per-level scales for its share of the budget, is clamped at
zero and made consistent top down (comparable integer transform). The tables then go to
:class:`~sketchsyn.synth.marginal.model.MarginalDistribution`, whose fitting (shared columns
made to agree, a maximum spanning tree on the mutual information of the noisy pairs) and
sampling are post-processing.

**Budget, for an auditor.** Neighbours: one row added or removed. A row falls in exactly one
cell of each level of each of the ``P + d`` trees. Tree ``t`` spends ``ε_t``: its level scales
``s_l`` satisfy ``Σ_l 1/s_l ≤ ε_t`` (:func:`sketchsyn.privacy.accounting.pmm_scales`), so the
row changes the noisy counts of tree ``t`` by a privacy loss of at most ``ε_t``. The trees use
independent noise, so by sequential composition the release is ``Σ_t ε_t``-DP, and the split
is ``ε_pair = (1 − singles_share)·ε/P`` for each pair and ``ε_single = singles_share·ε/d`` for
each column, nudged down by a few ulps where needed so that the exact rational sum is ``≤ ε``
(:func:`~sketchsyn.privacy.accounting.fit_to_budget`). Everything after the noise (clamping,
consistency, fitting the marginals to each other, choosing the tree of pairs from the noisy
tables, sampling) reads only the noisy counts and public parameters: post-processing. The pair
selection spends no budget: it is computed from the released noisy pair tables.

**Memory, up front.** The state is ``8·(P·4**bits + d·2**fine_bits) + 64`` bytes (:attr:`nbytes`),
fixed at construction; ``memory_bytes`` (default 1 MiB) bounds it and chooses ``bits`` and
``fine_bits`` (see :func:`plan`).

>>> import numpy as np
>>> from sketchsyn import Box
>>> rng = np.random.default_rng(0)
>>> t = rng.random(20000)
>>> X = np.column_stack([t, t**2, rng.random(20000)])
>>> syn = MarginalSynthesizer(Box.unit(3), epsilon=1.0, memory_bytes=64_000, rng=1)
>>> syn.nbytes <= 64_000
True
>>> syn.update_many(X)
>>> Y = syn.sample(1000, rng=2)
>>> Y.shape, syn.release().tree[0]
((1000, 3), (0, 1))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...domains import Box
from ...errors import (
    EPSILON_RANGE,
    ParameterError,
    SerializationError,
    check_choice,
    check_epsilon,
    check_int,
    check_positive,
)
from ...io.serial import Arrays, MetaReader
from ...privacy import accounting
from ...privacy.noise import discrete_laplace
from ...privacy.rng import RNGLike
from ..offline.histogram import LevelCounts
from ..tree import consistent_levels_integer
from .model import (
    MAX_BITS,
    MAX_COLUMNS,
    MAX_FINE_BITS,
    MarginalDistribution,
    pair_list,
    spread_bits,
)

__all__ = ["DEFAULT_MEMORY", "MarginalDistribution", "MarginalSynthesizer", "plan"]

DEFAULT_MEMORY = 1 << 20
_OVERHEAD = 64
_STATE_FIELDS = ("frozen", "lineage", "released", "diagnostics")
_PARAM_FIELDS = {"domain", "epsilon", "bits", "fine_bits", "singles_share", "consistency"}
_MAX_FINE_PLAN = 12  # finer single-column grids than 4096 bins buy nothing at W1 ≈ 10⁻³


def state_bytes(d: int, bits: int, fine_bits: int) -> int:
    """Bytes of a :class:`MarginalSynthesizer` state: ``8·(P·4**bits + d·2**fine_bits) + 64``.

    >>> state_bytes(4, 7, 12)
    917568
    """
    n_pairs = d * (d - 1) // 2
    return 8 * (n_pairs * 4**bits + d * 2**fine_bits) + _OVERHEAD


def plan(
    d: int,
    epsilon: float,
    memory_bytes: int = DEFAULT_MEMORY,
    expected_n: int | None = None,
    singles_share: float = 0.25,
) -> tuple[int, int, str]:
    """``(bits, fine_bits, why)`` for ``d`` columns within ``memory_bytes``.

    ``bits`` is the largest with room for the pair grids and single grids of at least as many
    bits; with ``expected_n`` it is also at most ``ceil(log2(ε_pair·n)/2) − 2``, i.e. a pair cell
    holds about ``16/ε_pair`` rows on average or more (finer pair cells hold mostly noise, and
    their conditionals scatter the sampled rows; the constant was chosen by trying one bit more
    and one bit fewer on nycflights13 in 4, 6 and 8 columns). ``fine_bits`` then
    takes what memory is left, up to 12 bits, and at most PMM's 1-D depth
    ``ceil(log2(ε_single·n)) − 1`` with ``expected_n``.

    >>> plan(4, 1.0, 1 << 20)[:2]
    (7, 12)
    >>> plan(4, 1.0, 1 << 20, expected_n=327_346)[:2]
    (6, 12)
    """
    owner = "MarginalSynthesizer"
    n_pairs = d * (d - 1) // 2
    eps_pair = (1 - singles_share) * epsilon / n_pairs
    eps_single = singles_share * epsilon / d
    bits = 0
    while bits < MAX_BITS and state_bytes(d, bits + 1, bits + 1) <= memory_bytes:
        bits += 1
    if bits == 0:
        raise ParameterError(
            f"The 'memory_bytes' parameter of {owner} must be at least "
            f"{state_bytes(d, 1, 1):,} for {d} columns (4 cells per pair, 2 per column). "
            f"Got {memory_bytes!r} instead."
        )
    why = f"bits={bits}: the finest pair grid within {memory_bytes:,} bytes"
    cap_fine = _MAX_FINE_PLAN
    if expected_n is not None:
        # 4**bits ≤ ε_pair·n/16, rounded up: bits = ceil(log2(ε_pair·n)/2) − 2.
        cap = max(1, (accounting.pmm_depth(eps_pair, expected_n, 2) + 1) // 2 - 2)
        if cap < bits:
            bits = cap
            why = (
                f"bits={bits}: about 16·(1/ε_pair) rows per pair cell or more "
                f"(ceil(log2(ε_pair·n)/2) − 2, n={expected_n:,})"
            )
        cap_fine = min(cap_fine, accounting.pmm_depth(eps_single, expected_n, 1))
    fine = bits
    while fine < max(cap_fine, bits) and state_bytes(d, bits, fine + 1) <= memory_bytes:
        fine += 1
    why += f"; fine_bits={fine} (memory, at most {max(cap_fine, bits)})"
    return bits, fine, why


class MarginalSynthesizer(LevelCounts):
    """One-pass private synthesizer from every 1- and 2-way marginal (PMM tree per table).

    Saved state: **trusted** (``STATE_PRIVACY = "trusted"``): the exact counts of every pair and
    single-column grid until ``release()`` draws the noise; keep the bytes with the data holder.
    Once released, the bytes also hold the release (public), and the release alone
    (:class:`~sketchsyn.synth.marginal.model.MarginalDistribution`) is private.

    Parameters
    ----------
    domain : Box
        Public bounds of the ``2 ≤ d ≤ 64`` columns.
    epsilon : float
        Total budget: pure ε-DP, one row added or removed (split: see the module docstring).
    memory_bytes : int, optional
        Bound on the state (default 1 MiB); chooses ``bits`` and ``fine_bits`` (:func:`plan`)
        unless they are given, in which case the state must fit in it when it is given.
    expected_n : int, optional
        Public guess of the number of rows, used only to choose ``bits`` and ``fine_bits``.
    bits, fine_bits : int, optional
        Bits per column of the pair grids (1…12) and of the single-column grids (bits…24).
    singles_share : float
        Share of ε spent on the ``d`` single-column trees (default 0.25), in ``(0, 1)``.
    consistency : {"uniform", "proportional"}
        PMM's comparable integer transform.
    rng : None, int, SeedSequence, Generator or RandomSource, optional
        Noise randomness (``None``: OS CSPRNG; a seed is for tests only, not private).

    Examples
    --------
    >>> import numpy as np
    >>> from sketchsyn import Box
    >>> syn = MarginalSynthesizer(Box.unit(2), epsilon=1.0, bits=4, fine_bits=6, rng=0)
    >>> syn.update_many(np.random.default_rng(1).random((500, 2)))
    >>> round(syn.epsilon_parts["pairs"] + syn.epsilon_parts["singles"], 12)
    1.0
    """

    STATE_PRIVACY = "trusted"
    FORMAT_VERSION = 1
    READS = (1,)
    TAKES_RNG = True

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        memory_bytes: int | None = None,
        expected_n: int | None = None,
        *,
        bits: int | None = None,
        fine_bits: int | None = None,
        singles_share: float = 0.25,
        consistency: str = "uniform",
        rng: RNGLike = None,
    ) -> None:
        owner = "MarginalSynthesizer"
        self._epsilon = check_epsilon(epsilon, owner)
        if not isinstance(domain, Box) or not 2 <= domain.d <= MAX_COLUMNS:
            raise ParameterError(
                f"The 'domain' parameter of {owner} must be a Box of 2 to {MAX_COLUMNS} "
                f"columns. Got {domain!r} instead."
            )
        share = check_positive(singles_share, "singles_share", owner)
        if not share < 1:
            raise ParameterError(
                f"The 'singles_share' parameter of {owner} must be in (0, 1). "
                f"Got {singles_share!r} instead."
            )
        self._consistency = check_choice(
            consistency, "consistency", owner, ("uniform", "proportional")
        )
        d = domain.d
        memory = None
        if memory_bytes is not None:
            memory = check_int(memory_bytes, "memory_bytes", owner, minimum=1)
        n = None if expected_n is None else check_int(expected_n, "expected_n", owner, minimum=1)
        if bits is None and fine_bits is None:
            bits, fine_bits, why = plan(d, self._epsilon, memory or DEFAULT_MEMORY, n, share)
        else:
            if bits is None:
                raise ParameterError(f"{owner} needs 'bits' when 'fine_bits' is given.")
            bits = check_int(bits, "bits", owner, minimum=1, maximum=MAX_BITS)
            fine_bits = bits if fine_bits is None else fine_bits
            fine_bits = check_int(
                fine_bits, "fine_bits", owner, minimum=bits, maximum=MAX_FINE_BITS
            )
            why = f"bits={bits}, fine_bits={fine_bits} as given"
            need = state_bytes(d, bits, fine_bits)
            if memory is not None and need > memory:
                raise ParameterError(
                    f"The 'memory_bytes' parameter of {owner} must be at least {need:,} for "
                    f"bits={bits}, fine_bits={fine_bits} and {d} columns. Got {memory!r} instead."
                )
        self._domain = domain
        self._bits, self._fine_bits, self._why = int(bits), int(fine_bits), why
        self._share = share
        self._pairs = pair_list(d)
        P = len(self._pairs)
        parts = accounting.fit_to_budget(
            [(1 - share) * self._epsilon / P] * P + [share * self._epsilon / d] * d,
            self._epsilon,
        )
        self._pair_eps = float(parts[:P].min())
        self._single_eps = float(parts[P:].min())
        low = EPSILON_RANGE[0]
        for what, value in (("pair", self._pair_eps), ("column", self._single_eps)):
            if not value >= low:  # a share so small or large that one table gets nothing
                raise ParameterError(
                    f"The 'singles_share' parameter of {owner} leaves each {what} table "
                    f"ε = {value:.3g}, below the smallest budget {low:.3g} (epsilon={epsilon!r}, "
                    f"{d} columns). Got {singles_share!r} instead."
                )
        gam2 = [Box.unit(2).gamma(lv) for lv in range(-1, 2 * self._bits + 1)]
        gam1 = [Box.unit(1).gamma(lv) for lv in range(-1, self._fine_bits + 1)]
        # Refuses a budget too small for the sampler, up front.
        self._pair_scales = accounting.pmm_scales(self._pair_eps, 2 * self._bits, gammas=gam2)
        self._single_scales = accounting.pmm_scales(self._single_eps, self._fine_bits, gammas=gam1)
        self._cells2 = 4**self._bits
        self._cells1 = 2**self._fine_bits
        self._level = 2 * self._bits
        self._start(P * self._cells2 + d * self._cells1, rng)

    # ---------------------------------------------------------------- parameters
    epsilon = ReadOnly[float](
        "Total privacy budget ε (split over the marginals: ``epsilon_parts``)."
    )
    bits = ReadOnly[int]("Bits per column of each pair grid.")
    fine_bits = ReadOnly[int]("Bits of each single-column grid.")

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The column pairs, in the order of the state."""
        return list(self._pairs)

    @property
    def epsilon_parts(self) -> dict[str, float]:
        """Budget spent on all pair trees together and on all single-column trees together."""
        P, d = len(self._pairs), self._domain.d
        return {"pairs": P * self._pair_eps, "singles": d * self._single_eps}

    @property
    def noise_scales(self) -> dict[str, np.ndarray]:
        """Integer Laplace scale of each level of a pair tree and of a single-column tree."""
        return {"pair": self._pair_scales.copy(), "single": self._single_scales.copy()}

    def explain(self) -> str:
        """What was chosen and why: grids, state bytes and the budget split."""
        P, d = len(self._pairs), self._domain.d
        return (
            f"MarginalSynthesizer: d={d} columns, {P} pairs; {self._why}; state "
            f"{self.nbytes:,} bytes; ε={self._epsilon:g} split as {P} pair trees × "
            f"{self._pair_eps:.4g} + {d} column trees × {self._single_eps:.4g} "
            f"(singles_share={self._share:g})"
        )

    def _params(self) -> dict[str, Any]:
        return {
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "bits": self._bits,
            "fine_bits": self._fine_bits,
            "singles_share": self._share,
            "consistency": self._consistency,
        }

    @classmethod
    def _param_fields(cls) -> set[str]:
        return set(_PARAM_FIELDS)

    @classmethod
    def _from_params(cls, fields: MetaReader, rng: RNGLike) -> MarginalSynthesizer:
        bits = fields.int("bits", minimum=1, maximum=MAX_BITS)
        return cls(
            fields.domain(kind="Box"),
            fields.epsilon("epsilon"),
            bits=bits,
            fine_bits=fields.int("fine_bits", minimum=bits, maximum=MAX_FINE_BITS),
            singles_share=fields.float("singles_share", positive=True, minimum=0.0, maximum=1.0),
            consistency=fields.str("consistency", ("uniform", "proportional")),
            rng=rng,
        )

    # ---------------------------------------------------------------- views
    def _pair_view(self) -> np.ndarray:
        P = len(self._pairs)
        return self._counts[: P * self._cells2].reshape(P, self._cells2)

    def _single_view(self) -> np.ndarray:
        P = len(self._pairs)
        return self._counts[P * self._cells2 :].reshape(self._domain.d, self._cells1)

    # ---------------------------------------------------------------- updates
    def update_many(self, X: Any) -> None:
        """Add a batch of rows (checked whole before the counts change)."""
        self._check_open()
        with self._usage.enter(type(self).__name__):
            box = self._domain
            work, dropped = box._offsets(box._points(X))
            d, n = work.shape
            fb, shift = self._fine_bits, np.uint64(self._fine_bits - self._bits)
            fine = np.empty((d, n), dtype=np.uint64)
            for i in range(d):
                t = work[i] / box._span[i] * 2.0**fb
                np.minimum(t, 2.0**fb - 1.0, out=t)
                np.maximum(t, 0.0, out=t)
                fine[i] = t.astype(np.uint64)
            add_single = [
                np.bincount(fine[i].astype(np.intp), minlength=self._cells1) for i in range(d)
            ]
            spread = [spread_bits(fine[i] >> shift) for i in range(d)]
            add_pair = [
                np.bincount(
                    ((spread[i] << np.uint64(1)) | spread[j]).astype(np.intp),
                    minlength=self._cells2,
                )
                for i, j in self._pairs
            ]
            self._pair_view()[...] += np.asarray(add_pair, dtype=np.int64).reshape(
                len(self._pairs), self._cells2
            )
            self._single_view()[...] += np.asarray(add_single, dtype=np.int64)
            self._n_seen += n
            self._n_dropped += int(dropped)

    # ---------------------------------------------------------------- release
    @staticmethod
    def _levels(leaves: np.ndarray) -> list[np.ndarray]:
        """Exact counts of every level 0…depth above a complete leaf level."""
        levels = [leaves]
        while levels[-1].size > 1:
            levels.append(levels[-1].reshape(-1, 2).sum(axis=1))
        return levels[::-1]

    def _exact_levels(self) -> list[list[np.ndarray]]:
        """Exact counts of every level of every tree (pairs first, then single columns)."""
        return [self._levels(row) for row in self._pair_view()] + [
            self._levels(row) for row in self._single_view()
        ]

    def _tree_scales(self) -> list[np.ndarray]:
        P = len(self._pairs)
        return [self._pair_scales] * P + [self._single_scales] * self._domain.d

    def _noisy_levels(self, source: Any) -> list[list[np.ndarray]]:
        """Exact level counts plus integer Laplace noise of each level's scale (not clamped)."""
        trees = self._exact_levels()
        streams = source.spawn(len(trees))
        out = []
        for levels, scales, stream in zip(trees, self._tree_scales(), streams, strict=True):
            sub = stream.spawn(len(levels))
            out.append(
                [
                    exact + discrete_laplace(float(s), exact.size, rng=sub[lv])
                    for lv, (exact, s) in enumerate(zip(levels, scales, strict=True))
                ]
            )
        return out

    def _release_now(self) -> tuple[MarginalDistribution, dict[str, np.ndarray]]:
        """Draw the noise once, make every tree consistent, return the private release."""
        leaves = []
        for noisy in self._noisy_levels(self._source):
            clamped = [np.maximum(level, 0) for level in noisy]
            leaves.append(consistent_levels_integer(clamped, self._consistency)[-1])
        P = len(self._pairs)
        dist = MarginalDistribution(
            self._domain,
            self._epsilon,
            np.asarray(leaves[:P], dtype=np.int64),
            np.asarray(leaves[P:], dtype=np.int64),
            self._pair_eps,
            self._single_eps,
            params=self._release_params(),
        )
        return dist, {}

    def sample(self, m: int, rng: RNGLike = None, *, as_frame: bool = False) -> Any:
        """``m`` synthetic rows from the release (releases first if needed)."""
        return self.release().sample(m, rng=rng, as_frame=as_frame)

    def count(self, lower: Any, upper: Any) -> float:
        """Noisy count of rows in ``[lower, upper]`` from the release (releases first)."""
        return self.release().count(lower, upper)

    # ---------------------------------------------------------------- bytes
    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> MarginalSynthesizer:
        """Every field is checked and the counts' dtype and shape are validated before
        anything is built; ``rng`` seeds the noise of a later release."""
        unknown = fields.names() - set(_STATE_FIELDS) - _PARAM_FIELDS
        if unknown:
            raise SerializationError(f"{cls.kind} blob header has unknown fields {sorted(unknown)}")
        domain = fields.domain(kind="Box")
        bits = fields.int("bits", minimum=1, maximum=MAX_BITS)
        fine = fields.int("fine_bits", minimum=bits, maximum=MAX_FINE_BITS)
        if not 2 <= domain.d <= MAX_COLUMNS:
            raise SerializationError(
                f"{cls.kind} blob header field 'domain' has {domain.d} columns"
            )
        size = len(pair_list(domain.d)) * 4**bits + domain.d * 2**fine
        counts = fields.array(arrays, "counts", np.int64, (size,))
        copy = cls._read_copy(fields, arrays, MarginalDistribution)
        for name in arrays:
            if name not in ("counts", "release"):
                raise SerializationError(f"{cls.kind} blob has an unexpected array {name!r}")
        if counts.size and counts.min() < 0:
            raise SerializationError(f"{cls.kind} blob array 'counts' holds negative counts")
        obj = cls._from_params(fields, rng)
        obj._load_copy(counts, copy, {})
        return obj

    def __repr__(self) -> str:
        return (
            f"MarginalSynthesizer(d={self._domain.d}, epsilon={self._epsilon!r}, "
            f"bits={self._bits}, fine_bits={self._fine_bits}, nbytes={self.nbytes})"
        )
