"""How PrivHP summaries of one stream combine: :meth:`Combine.merge` adds another summary's
counters and sketches (linear state), :meth:`Combine.flush` ships a local collector's rows so far
as a private summary with fresh noise. A mixin of :class:`~sketchsyn.synth.privhp.PrivHP`, whose
attributes it reads (``_tree``, ``_bank``, the diagnostics, the lineage and the release guard).
"""

from __future__ import annotations

from typing import Any

from ...errors import IncompatibleError, ParameterError, ReleasedError
from ...privacy.rng import RNGLike
from ..offline.histogram import check_same_params
from .loading import KIND

__all__ = ["Combine"]


class Combine:
    """:meth:`merge` and :meth:`flush` of a PrivHP (module docstring)."""

    def merge(self, other: Any) -> None:
        """Add another PrivHP built with the same parameters and seed (in place).

        Counters and sketches are linear, so the merged state is the state of the concatenated
        streams **plus both noise draws**. Privacy of the sum: each item is in one of the two
        streams, so the merged summary is still ε-DP for the union (parallel composition); its
        noise variance is the sum of both. Raw + raw stays raw (exact, merge before noise);
        raw + noisy is noisy with the noisy side's single draw.

        Refused (:class:`IncompatibleError` / :class:`ReleasedError`): different parameters,
        operands that share a noise draw (a copy of the other, or both built with the same seed:
        the sum would hold ``2·noise``), and a released operand (its noise was already published
        with its state, so adding rows to it would release that draw at a second position).

        With a privacy unit, every unit's rows must have gone to one of the two (data
        partitioned by unit, as :func:`sketchsyn.spark.fit` and :func:`sketchsyn.dask.fit` do
        with ``unit=``): the sum keeps the ``2L`` bound. The merged summary has no bounder (this
        one knows only its own units) and takes no more rows.
        """
        self._check_open()
        if not isinstance(other, type(self)):
            raise IncompatibleError(f"can only merge a PrivHP into a PrivHP, got {type(other)!r}")
        check_same_params(self._params(), other._params(), "PrivHP summaries")
        if other is self:
            raise IncompatibleError("cannot merge a PrivHP with itself (its noise would double)")
        if other.released:
            raise ReleasedError(
                "cannot merge a released PrivHP: its noise draw was published with its state"
            )
        with self._usage.enter(KIND):
            lineage = self._lineage.union(other._lineage, KIND)
            self._tree += other._tree
            self._bank += other._bank
            self._n_seen += other._n_seen
            self._n_removed += other._n_removed
            self._n_dropped += other._n_dropped
            for key, n in other._adjusted.items():
                self._adjusted[key] = self._adjusted.get(key, 0) + n
            self._raw = self._raw and other._raw
            self._flushed = self._flushed or other._flushed
            self._lineage = lineage
            self._bounder = None

    def flush(self, rng: RNGLike = None) -> Any:
        """Ship the rows since the last flush as a private summary with fresh noise.

        Only for a ``raw=True`` summary, kept by a trusted local collector. Returns a new,
        private PrivHP (same parameters, noise drawn now from ``rng``, a new lineage) holding
        this summary's counts, then resets this summary to zero. Each row is in exactly one
        flushed summary, so all flushed summaries together are ε-DP (parallel composition)
        and a server may merge them. The cost is noise growth: the merge of ``m`` flushes
        carries ``m`` independent draws per counter (variance ``m`` times one draw's), so flush
        as rarely as the reporting needs.

        With a privacy unit the bounder stays here and keeps its slots: a unit's kept rows,
        at most ``L`` over all flushes, are spread over them, so the flushes together move by at
        most ``2L`` rows between neighbours and their noise (sized for ``2L``) makes them
        ε-DP together at the user level. A flushed summary carries no bounder.

        >>> import numpy as np
        >>> from sketchsyn import Box, PrivHP
        >>> local = PrivHP(Box.unit(2), 1.0, k=4, width=32, depth=6, raw=True)
        >>> local.update_many(np.full((10, 2), 0.3))
        >>> hourly = local.flush(rng=1)   # ship hourly.to_bytes() to the server
        >>> hourly.raw, local.n_seen
        (False, 0)
        """
        self._check_open()
        if not self._raw:
            raise ParameterError(
                "flush() needs a PrivHP built with raw=True (a local collector): this one is "
                "already noisy, and shipping its state twice would release one noise draw at "
                "two stream positions"
            )
        with self._usage.enter(KIND):
            private = self._from_params(self._params(), rng=rng, raw=False, bounder=None)
            private._tree += self._tree
            private._bank += self._bank
            private._n_seen, private._n_removed = self._n_seen, self._n_removed
            private._n_dropped, private._adjusted = self._n_dropped, self._adjusted
            self._tree[...] = 0
            self._bank[...] = 0
            self._n_seen = self._n_removed = self._n_dropped = 0
            self._adjusted = {}
            self._flushed = True
        return private
