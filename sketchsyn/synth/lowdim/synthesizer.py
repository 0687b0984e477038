"""Low-dimensional synthetic data: private PCA, then PMM or PSMM in the projected space.

He's dissertation chapter 4 (Algorithm 5 with Algorithms 6–9, §4.5). Records in a ``Box`` of
dimension d are normalised to ``[0, 1]^d`` (ℓ∞ metric, as in the chapter), then

1. private centred covariance ``M̂`` (Algorithm 6, ``ε_cov``) and its eigenvectors;
2. private mean ``X̄ + λ`` (Algorithm 7, ``ε_mean``) and the top-d' eigenvectors ``V̂``;
3. PMM (any d' ≥ 1, linear time) or PSMM (d' ≥ 3, LP) with ``ε_synth`` on the projected
   coordinates ``(x − X̄_priv)·V̂`` in a public d'-dimensional box;
4. release: points ``X̄_priv + V̂ a`` clipped to the box (the metric projection), in user units.

Noise on the covariance and the mean is integer Laplace on a fine public grid; the rounding's
effect on the sensitivity is added to the scales (:mod:`sketchsyn.synth.lowdim.private_pca` gives
the formulas: ``σ = (3d²/n + g·d²/2)/ε_cov`` and ``μ = (d/n + d·h)/ε_mean``).

Privacy model (the chapter's): pure ε-DP for **replace-one** neighbours with **n public**
(Algorithm 6 divides by n); add/remove neighbours are not supported. ``ε = ε_cov + ε_mean +
ε_synth`` by sequential composition (``epsilon_parts`` exposes them). Default split
``(4, 1, 1)``, i.e. ``2ε/3`` on the covariance and ``ε/6`` each on the mean and the synthesis,
not the chapter's thirds (``split=(1, 1, 1)``): the covariance noise (entry scale
``3d²/(ε_cov·n)``) dominates the error; on a plane in d = 20 (ε = 1) this split lowered W1 from
0.196 to 0.120 at n = 10⁵ and from 0.041 to 0.034 at n = 10⁶ (docs/lowdim.md).

One deviation from the chapter: PMM and PSMM are ε-DP for add/remove (one changed cell per
level), and replacing a record moves one unit of count from one cell to another, so the
synthesis stage runs PMM/PSMM at ``ε_synth/2`` (every noise scale doubled) to be
``ε_synth``-DP for replace-one; the chapter's proof (Proposition 4.9) charges the add/remove
figure.

A seeded ``rng`` is for tests and experiments only: whoever knows the seed can remove the noise.

One-pass mode (``pca_rows=N``): the first N records feed only the covariance and mean, the later
records only the synthesis (each record reaches exactly one part). With record positions
public, replacing one record changes only the part it belongs to, so by parallel composition
the guarantee is ``max(ε_cov + ε_mean, ε_synth) ≤ ε``; the covariance and mean then use
``n = pca_rows``.

The state before the release is a **trusted curator's**: ``S1 = Σ x`` and ``S2 = Σ x xᵀ`` are
exact (and so are the synthesis stage's cell counts). After ``fix_subspace()`` the exact sums
are discarded; after ``release()`` only the release is kept.

>>> import numpy as np
>>> from sketchsyn import Box
>>> rng = np.random.default_rng(0)
>>> t = rng.random((20000, 1))
>>> X = np.hstack([t, 1 - t, 0.5 * t, 0.5 + 0.0 * t])  # a segment in d = 4
>>> syn = LowDimSynthesizer(Box.unit(4), epsilon=1.0, target_dim=1, rng=1)
>>> dist = syn.fit(X)
>>> dist.sample(5, rng=2).shape
(5, 4)
>>> round(sum(syn.epsilon_parts.values()), 12)
1.0
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ...attributes import ReadOnly
from ...domains import Box
from ...errors import (
    EPSILON_RANGE,
    IncompatibleError,
    InputError,
    ParameterError,
    ReleasedError,
    SerializationError,
    check_choice,
    check_epsilon,
    check_int,
    check_memory,
    check_positive,
)
from ...io.serial import Arrays, MetaReader
from ...io.stream import consume
from ...io.summary import Summary
from ...privacy import accounting
from ...privacy.lineage import Lineage, state_digest
from ...privacy.rng import RNGLike, as_source
from ..offline.histogram import check_same_params
from ..offline.pmm import PMM
from ..offline.psmm import MAX_CELLS, PSMM
from . import private_pca
from .release import MAX_N as _MAX_N
from .release import LowDimDistribution

__all__ = ["LowDimDistribution", "LowDimSynthesizer"]

_KIND = "LowDimSynthesizer"
_MAX_INNER_DEPTH = 26
# Largest ratio of two weights of ``split``: the smallest stage keeps a realisable budget.
_MAX_SPLIT_RATIO = 2.0**20
_PHASES = ("accumulate", "synthesize", "released")


class LowDimSynthesizer(Summary):
    """Private PCA, then PMM or PSMM on the private d'-dimensional subspace (Algorithm 5).

    Saved state: **trusted** before the release (``STATE_PRIVACY = "trusted"``): the exact
    moment sums, then the synthesis stage's exact cell counts; after ``release()`` it holds the
    release only and is **private** (:attr:`state_privacy`).

    Parameters
    ----------
    domain : Box
        Public bounds of the d-dimensional records (policy ``"raise"`` or ``"clip"``; ``"drop"``
        is refused since n must be public).
    epsilon : float
        Total budget (pure ε-DP, replace-one neighbours, n public; see the module docstring).
    target_dim : int, optional
        d' in ``1…d`` (PSMM: ``3…d``). ``None``: chosen privately from the noisy spectrum
        (§4.5, over ``2…d``; PSMM ``3…d``).
    method : {"pmm", "psmm"}
        Synthesis in the projected space.
    rng : None, int, SeedSequence, Generator or RandomSource, optional
        Noise randomness (``None``: OS CSPRNG; a seed is for tests only, not private).
    depth : int, optional
        Depth of the synthesis partition. PMM default ``ceil(log2(ε_synth·n))`` (Algorithm 8);
        PSMM default the same capped so that ``2**depth ≤ MAX_CELLS`` (a larger value is refused).
    pca_rows : int, optional
        One-pass mode: the first ``pca_rows`` records learn the subspace, the rest are
        synthesized (parallel composition). ``None``: two passes (``fit`` or the explicit
        ``update_many`` → ``fix_subspace`` → ``update_many`` protocol).
    expected_n : int, optional
        One-pass mode without ``depth``: public guess of the total number of records, used only
        for the default depth.
    split : tuple of three positive floats
        Relative weights of ``(ε_cov, ε_mean, ε_synth)``; default ``(4, 1, 1)`` (measured
        better than the chapter's thirds, ``(1, 1, 1)``; see the module docstring).

    Attributes
    ----------
    epsilon_parts : dict
        ``{"covariance": ε_cov, "mean": ε_mean, "synthesis": ε_synth}``, summing to ε.
    """

    STATE_PRIVACY = "trusted"
    TRUSTED_FIELDS = ("n_pca", "n_synth", "diagnostics")  # exact counts: never in a release
    FORMAT_VERSION = 1

    def __init__(
        self,
        domain: Any,
        epsilon: float,
        *,
        target_dim: int | None = None,
        method: str = "pmm",
        rng: RNGLike = None,
        depth: int | None = None,
        pca_rows: int | None = None,
        expected_n: int | None = None,
        split: tuple[float, float, float] = (4.0, 1.0, 1.0),
    ) -> None:
        owner = "LowDimSynthesizer"
        if not isinstance(domain, Box):
            raise ParameterError(
                f"The 'domain' parameter of {owner} must be a Box. Got {domain!r} instead."
            )
        if domain.out_of_bounds == "drop":
            raise ParameterError(
                f"The 'domain' parameter of {owner} must not drop records (out_of_bounds "
                "'raise' or 'clip'): n is public. Got out_of_bounds='drop' instead."
            )
        self._domain = domain
        d = domain.d
        self._epsilon = check_epsilon(epsilon, owner)
        self._method = check_choice(method, "method", owner, ("pmm", "psmm"))
        smallest = 3 if self._method == "psmm" else 1
        if target_dim is not None:
            target_dim = check_int(target_dim, "target_dim", owner, minimum=smallest, maximum=d)
        elif self._method == "psmm" and d < 3:
            raise ParameterError(
                f"The 'method' parameter of {owner} is 'psmm', which needs d' >= 3, but the "
                f"domain has d = {d}. Use method='pmm'."
            )
        self._target_dim = target_dim
        self._target_dim_arg = target_dim
        if depth is not None:
            limit = int(np.log2(MAX_CELLS)) if self._method == "psmm" else _MAX_INNER_DEPTH
            if self._method == "psmm" and isinstance(depth, int) and depth > limit:
                raise ParameterError(
                    f"The 'depth' parameter of {owner} gives 2**{depth} PSMM cells; the linear "
                    f"programme is limited to MAX_CELLS = {MAX_CELLS}. Got {depth!r} instead."
                )
            depth = check_int(depth, "depth", owner, minimum=1, maximum=limit)
        self._depth = depth
        self._depth_arg = depth
        if pca_rows is not None:
            pca_rows = check_int(pca_rows, "pca_rows", owner, minimum=2, maximum=_MAX_N)
        self._pca_rows = pca_rows
        if expected_n is not None:
            expected_n = check_int(expected_n, "expected_n", owner, minimum=1)
        self._expected_n = expected_n
        if pca_rows is not None and depth is None:
            if expected_n is None or expected_n <= pca_rows:
                raise ParameterError(
                    f"The 'expected_n' parameter of {owner} must be an int > pca_rows = "
                    f"{pca_rows} in one-pass mode without 'depth'. Got {expected_n!r} instead."
                )
        try:
            weights = [check_positive(w, "split", owner) for w in split]
        except TypeError:
            raise ParameterError(
                f"The 'split' parameter of {owner} must be three positive weights. "
                f"Got {split!r} instead."
            ) from None
        if len(weights) != 3 or max(weights) > _MAX_SPLIT_RATIO * min(weights):
            raise ParameterError(
                f"The 'split' parameter of {owner} must be three positive weights, the largest "
                f"at most 2**20 times the smallest. Got {split!r} instead."
            )
        self._split = tuple(weights)
        total = sum(weights)
        e_cov = self._epsilon * weights[0] / total
        e_mean = self._epsilon * weights[1] / total
        self._parts = {
            "covariance": e_cov,
            "mean": e_mean,
            "synthesis": self._epsilon - (e_cov + e_mean),
        }
        if min(self._parts.values()) < EPSILON_RANGE[0]:
            raise ParameterError(
                f"The 'epsilon' parameter of {owner} must leave every stage of 'split' a budget "
                f">= 2**-30. Got epsilon={epsilon!r} with split={split!r} instead."
            )
        check_memory(16 * d * d, owner, f"the {d} × {d} moment sums")
        self._source = as_source(rng)
        d2 = (d, d)
        self._s1 = np.zeros(d, dtype=np.int64)
        self._s2 = np.zeros(d2, dtype=np.int64)
        self._n_pca = 0
        self._n_synth = 0
        self._phase = "accumulate"
        self._frozen = False
        self._lineage = Lineage.new(self._source, _KIND, self._params())
        # fixed by fix_subspace()
        self._cov_grid: np.ndarray | None = None
        self._mean_grid: np.ndarray | None = None
        self._cov_k = 0
        self._mean_k = 0
        self._components: np.ndarray | None = None
        self._mean_unit: np.ndarray | None = None
        self._spectrum: np.ndarray | None = None
        self._inner: PMM | PSMM | None = None
        self._released: LowDimDistribution | None = None

    # ------------------------------------------------------------------ properties
    domain = ReadOnly[Box]("The public box of the data, in user units.")
    epsilon = ReadOnly[float]("Total privacy budget ε (mean, covariance and the synthesizer).")

    @property
    def epsilon_parts(self) -> dict[str, float]:
        """Budget of each stage; the values sum to ``epsilon`` (sequential composition)."""
        return dict(self._parts)

    method = ReadOnly[str]('``"pmm"`` or ``"psmm"``: the synthesizer in the projected space.')
    phase = ReadOnly[str](
        '``"accumulate"`` (sums), ``"synthesize"`` (subspace fixed) or ``"released"``.'
    )
    target_dim = ReadOnly[int | None]("d' (``None`` until chosen when it is chosen privately).")
    pca_rows = ReadOnly[int | None]("Rows used for the private PCA (``None``: every row).")
    n_pca = ReadOnly[int]("Records in the covariance and mean (public under the chapter's model).")
    n_synth = ReadOnly[int]("Records counted by the synthesis stage (exact; not private).")

    @property
    def covariance_noise(self) -> private_pca.GridNoise:
        """Grid and scale of the covariance noise for the current ``n_pca`` (Algorithm 6)."""
        return private_pca.covariance_noise(
            self._domain.d, max(self._n_pca, 2), self._parts["covariance"]
        )

    @property
    def mean_noise(self) -> private_pca.GridNoise:
        """Grid and scale of the mean noise for the current ``n_pca`` (Algorithm 7)."""
        return private_pca.mean_noise(self._domain.d, max(self._n_pca, 1), self._parts["mean"])

    @property
    def covariance_noise_variance(self) -> tuple[float, float]:
        """Variance of the noise on ``(off-diagonal, diagonal)`` entries of ``M̂``.

        ``g²·Var(Lap_Z(σ/g))`` and ``g²·Var(Lap_Z(2σ/g))``: about ``2σ²`` and ``8σ²``, with
        ``σ = (3d²/n + g·d²/2)/ε_cov`` (unit-box units).
        """
        noise = self.covariance_noise
        return noise.variance(1), noise.variance(2)

    @property
    def mean_noise_variance(self) -> float:
        """Variance of the noise on each coordinate of the private mean: about ``2μ²``,
        ``μ = (d/n + d·h)/ε_mean`` (unit-box units)."""
        return self.mean_noise.variance(1)

    def _require_fixed(self) -> None:
        if self._components is None:
            raise ReleasedError("the subspace is not fixed yet: call fix_subspace() or fit()")

    @property
    def noisy_covariance(self) -> np.ndarray:
        """``M̂`` (unit-box units); private, available once the subspace is fixed."""
        self._require_fixed()
        assert self._cov_grid is not None
        return self._cov_grid.astype(np.float64) * 2.0**-self._cov_k

    @property
    def private_mean(self) -> np.ndarray:
        """``X̄ + λ`` in unit-box units; private, available once the subspace is fixed."""
        self._require_fixed()
        assert self._mean_unit is not None
        return self._mean_unit.copy()

    @property
    def components(self) -> np.ndarray:
        """``V̂`` (d × d', orthonormal, unit-box coordinates)."""
        self._require_fixed()
        assert self._components is not None
        return self._components.copy()

    @property
    def spectrum(self) -> np.ndarray:
        """Eigenvalues of ``M̂``, decreasing."""
        self._require_fixed()
        assert self._spectrum is not None
        return self._spectrum.copy()

    @property
    def nbytes(self) -> int:
        """State size: the two sums (or the noisy subspace) plus the synthesis partition."""
        base = self._s1.nbytes + self._s2.nbytes + 64
        if self._inner is not None:
            base += self._inner.nbytes
        return int(base)

    # ------------------------------------------------------------------ input
    lineage = ReadOnly[Lineage](
        "The identity of this summary's noise, shared by its copies (one release guard)."
    )

    def _check_open(self) -> None:
        self._lineage.check_open(_KIND)
        if self._frozen:
            raise ReleasedError("this LowDimSynthesizer is a snapshot; it is read-only")
        if self._released is not None:
            raise ReleasedError("this LowDimSynthesizer was released; it accepts no updates")

    def _unit(self, X: Any) -> np.ndarray:
        """Validate a batch (shape, finite, inside the box) → unit-box float64 ``(n, d)``."""
        box = self._domain
        arr = box._points(X)  # shape and numbers, with the domain's messages
        if arr.shape[0] == 0:
            return np.empty((0, box.d))
        if not np.isfinite(arr).all():
            i = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
            raise InputError(f"X has a NaN or infinite value: row {i} = {arr[i].tolist()}")
        U = (arr - box.lower) / (box.upper - box.lower)
        if U.min() < 0.0 or U.max() > 1.0:
            if box.out_of_bounds == "raise":
                i = int(np.flatnonzero(((U < 0.0) | (U > 1.0)).any(axis=1))[0])
                raise InputError(
                    f"X has a point outside the box: row {i} = {arr[i].tolist()} "
                    f"(bounds {box.lower.tolist()} … {box.upper.tolist()})"
                )
            np.clip(U, 0.0, 1.0, out=U)
        return U

    def update(self, x: Any) -> None:
        """Add one record."""
        self.update_many([x])

    def update_many(self, X: Any) -> None:
        """Add a batch: to the sums before the subspace is fixed, to the synthesis after.

        The batch is checked whole first; a refused batch changes nothing. In one-pass mode the
        batch is split at the ``pca_rows``-th record of the stream.
        """
        self._check_open()
        U = self._unit(X)
        if U.shape[0] == 0:
            return
        if self._phase == "accumulate":
            take = U.shape[0]
            if self._pca_rows is not None:
                take = min(take, self._pca_rows - self._n_pca)
            if self._n_pca + take > _MAX_N:
                raise InputError(f"more than {_MAX_N} records for the exact sums")
            s1, s2 = private_pca.moment_sums(private_pca.quantize(U[:take]))
            self._s1 += s1
            self._s2 += s2
            self._n_pca += take
            if self._pca_rows is not None and self._n_pca == self._pca_rows:
                self.fix_subspace()
            U = U[take:]
            if U.shape[0] == 0:
                return
        self._project_and_count(U)

    def _project_and_count(self, U: np.ndarray) -> None:
        assert self._inner is not None and self._mean_unit is not None
        A = (U - self._mean_unit) @ self._components
        self._inner.update_many(A)
        self._n_synth += U.shape[0]

    def consume(self, iterable: Iterable[Any], batch_size: int = 65536) -> int:
        """Stream any iterable of rows or 2-D arrays in bounded memory; returns rows read."""
        self._check_open()
        return consume(self.update_many, iterable, batch_size, self._domain.d)

    # ------------------------------------------------------------------ the subspace
    def fix_subspace(self) -> None:
        """Draw the covariance and mean noise, fix d' and ``V̂``; later records are synthesized.

        Uses ``n = n_pca`` (public). The exact sums are discarded afterwards.
        """
        self._check_open()
        if self._phase != "accumulate":
            raise ReleasedError("the subspace is already fixed")
        n, d = self._n_pca, self._domain.d
        if n < 2:
            raise ParameterError(
                f"The covariance of LowDimSynthesizer needs at least 2 records. Got {n} instead."
            )
        if self._pca_rows is not None and n != self._pca_rows:
            raise ParameterError(
                f"One-pass mode fixes the subspace after pca_rows = {self._pca_rows} records. "
                f"Got {n} instead."
            )
        streams = self._source.spawn(3)
        cov_noise = private_pca.covariance_noise(d, n, self._parts["covariance"])
        mean_noise = private_pca.mean_noise(d, n, self._parts["mean"])
        cov_grid = private_pca.private_covariance(self._s1, self._s2, n, cov_noise, streams[0])
        mean_grid = private_pca.private_mean(self._s1, n, mean_noise, streams[1])
        self._install(cov_grid, cov_noise.k, mean_grid, mean_noise.k, streams[2])
        self._s1[...] = 0
        self._s2[...] = 0

    def _n_for_synthesis(self) -> int:
        if self._pca_rows is None or self._expected_n is None:
            return self._n_pca
        return max(self._expected_n - self._pca_rows, 1)

    def _install(
        self, cov_grid: np.ndarray, cov_k: int, mean_grid: np.ndarray, mean_k: int, rng: Any
    ) -> None:
        """Eigen-decompose ``M̂``, choose d', build the synthesis stage (post-processing)."""
        d = self._domain.d
        M = cov_grid.astype(np.float64) * 2.0**-cov_k
        values, vectors = np.linalg.eigh(M)
        order = np.argsort(values)[::-1]
        spectrum, vectors = values[order], vectors[:, order]
        eps_s = self._parts["synthesis"]
        n_s = self._n_for_synthesis()
        if self._target_dim is None:
            smallest = 3 if self._method == "psmm" else min(2, d)
            self._target_dim = private_pca.choose_target_dim(spectrum, eps_s, n_s, smallest, d)
        k = self._target_dim
        components = vectors[:, :k].copy()
        mean_unit = mean_grid.astype(np.float64) * 2.0**-mean_k
        lower, upper = private_pca.projection_box(components, mean_unit)
        inner_box = Box(lower, upper, out_of_bounds="clip")
        depth = self._depth
        if self._method == "pmm":
            if depth is None:
                depth = min(accounting.pmm_depth(eps_s, n_s, k), _MAX_INNER_DEPTH)
            inner: PMM | PSMM = PMM(inner_box, eps_s / 2, depth=depth, rng=rng)
        else:
            if depth is None:
                depth = min(accounting.pmm_depth(eps_s, n_s, k), int(np.log2(MAX_CELLS)))
            inner = PSMM(inner_box, eps_s / 2, depth=depth, rng=rng)
        self._cov_grid, self._cov_k = cov_grid, int(cov_k)
        self._mean_grid, self._mean_k = mean_grid, int(mean_k)
        self._components, self._mean_unit, self._spectrum = components, mean_unit, spectrum
        self._inner = inner
        self._depth = depth
        self._phase = "synthesize"

    # ------------------------------------------------------------------ two passes
    def fit(self, source: Any, batch_size: int = 65536) -> LowDimDistribution:
        """Algorithm 5 in two passes over an array or a re-iterable source; returns the release.

        Pass 1 accumulates the sums, the subspace is fixed, pass 2 projects and counts the same
        records. A source that yields a different number of records the second time (an
        exhausted iterator, say) is refused.
        """
        self._check_open()
        if self._pca_rows is not None:
            raise ParameterError(
                "fit() is the two-pass algorithm; this LowDimSynthesizer is in one-pass mode "
                f"(pca_rows = {self._pca_rows}). Use consume() or update_many()."
            )
        if self._phase != "accumulate" or self._n_pca:
            raise ParameterError("fit() needs a fresh LowDimSynthesizer")
        if isinstance(source, np.ndarray):
            # One batch, checked as given: a wrong width is refused, never reshaped into rows.
            source = [source]
        self.consume(source, batch_size)
        self.fix_subspace()
        self.consume(source, batch_size)
        if self._n_synth != self._n_pca:
            raise InputError(
                f"the second pass over the source gave {self._n_synth} records, the first "
                f"{self._n_pca}: fit() needs an array or a re-iterable source"
            )
        return self.release()

    # ------------------------------------------------------------------ release
    def release(self) -> LowDimDistribution:
        """Release the synthesis stage and wrap it with the private subspace (once)."""
        if self._released is not None:
            return self._released
        digest = self._digest()
        stored = self._lineage.lookup(digest, _KIND)  # a copy released at another state raises
        if stored is not None:
            self._released, self._phase, self._inner = stored, "released", None
            return stored
        if self._pca_rows is None and (self._phase == "accumulate" or self._n_synth != self._n_pca):
            raise InputError(
                f"the synthesis pass saw {self._n_synth} records and the first pass "
                f"{self._n_pca}: the two passes must read the same records (fit() does both)"
            )
        if self._phase == "accumulate":
            self.fix_subspace()  # one-pass mode: refused unless pca_rows records were seen
        assert self._inner is not None and self._components is not None
        assert self._mean_unit is not None and self._spectrum is not None
        inner = self._inner.release()
        self._released = LowDimDistribution(
            self._domain,
            inner,
            self._components,
            self._mean_unit,
            self._spectrum,
            epsilon=self._epsilon,
            epsilon_parts=self._parts,
            method=self._method,
            one_pass=self._pca_rows is not None,
        )
        self._phase = "released"
        self._inner = None  # its exact counts are no longer needed
        self._lineage.record(digest, self._released)
        return self._released

    def _digest(self) -> bytes:
        """Identifies the state a release is drawn from (copies at one state share it)."""
        if self._phase == "accumulate":
            return state_digest(self._s1, self._s2, np.array([self._n_pca]))
        assert self._inner is not None and self._cov_grid is not None
        assert self._mean_grid is not None
        inner = np.frombuffer(self._inner._digest(), dtype=np.uint8)
        return state_digest(self._cov_grid, self._mean_grid, inner, np.array([self._n_synth]))

    # ------------------------------------------------------------------ protocol
    def _params(self) -> dict[str, Any]:
        return {
            "domain": self._domain.to_dict(),
            "epsilon": self._epsilon,
            "method": self._method,
            "target_dim": self._target_dim_arg,
            "depth": self._depth_arg,
            "pca_rows": self._pca_rows,
            "expected_n": self._expected_n,
            "split": list(self._split),
        }

    def merge(self, other: LowDimSynthesizer) -> None:
        """Add another summary's exact state (same parameters, same phase).

        Before ``fix_subspace`` the sums add (one-pass mode: up to ``pca_rows`` records in
        total). After it both must hold the same private subspace (a snapshot's copy, say),
        and the synthesis counts add.
        """
        self._check_open()
        if not isinstance(other, LowDimSynthesizer):
            raise IncompatibleError(
                f"cannot merge a {type(other).__name__} into a LowDimSynthesizer"
            )
        if other is self:
            raise IncompatibleError("cannot merge a summary with itself")
        if other._released is not None:
            raise IncompatibleError("cannot merge a released LowDimSynthesizer")
        if other._phase != self._phase:
            raise IncompatibleError(
                f"cannot merge a summary in phase {other._phase!r} into one in {self._phase!r}"
            )
        check_same_params(self._params(), other._params())
        if self._phase == "accumulate":
            n = self._n_pca + other._n_pca
            if self._pca_rows is not None and n > self._pca_rows:
                raise IncompatibleError(
                    f"merging gives {n} records for the subspace, more than pca_rows = "
                    f"{self._pca_rows}"
                )
            if n > _MAX_N:
                raise IncompatibleError(f"merging gives more than {_MAX_N} records")
            self._s1 += other._s1
            self._s2 += other._s2
            self._n_pca = n
            if self._pca_rows is not None and n == self._pca_rows:
                self.fix_subspace()
            return
        assert self._cov_grid is not None and other._cov_grid is not None
        assert self._mean_grid is not None and other._mean_grid is not None
        same = (
            self._cov_k == other._cov_k
            and self._mean_k == other._mean_k
            and np.array_equal(self._cov_grid, other._cov_grid)
            and np.array_equal(self._mean_grid, other._mean_grid)
            and np.array_equal(self._components, other._components)
            and self._n_pca == other._n_pca
        )
        if not same:
            raise IncompatibleError("cannot merge summaries with different private subspaces")
        assert self._inner is not None and other._inner is not None
        self._inner.merge(other._inner)
        self._n_synth += other._n_synth

    @property
    def state_privacy(self) -> str:
        """``"trusted"`` before the release (exact sums or cell counts), ``"private"`` after
        (only the release is kept)."""
        return "private" if self._phase == "released" else "trusted"

    def _state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Before ``fix_subspace`` the **exact** sums ``S1``, ``S2`` and ``n_pca``; after it,
        the noisy covariance and mean (private) and the synthesis stage's **exact** cell counts
        (a trusted curator's state: keep it with the data holder). After ``release()`` only the
        release (private) and the released flag; a loaded released object refuses updates and
        returns the stored release."""
        meta: dict[str, Any] = self._params() | {
            "phase": self._phase,
            "frozen": self._frozen,
            "lineage": self._lineage.to_meta(),
        }
        if self._phase != "released":  # an exact count: only in a trusted state
            meta["n_pca"] = self._n_pca
        arrays: dict[str, np.ndarray] = {}
        if self._phase == "accumulate":
            arrays = {"s1": self._s1, "s2": self._s2}
        elif self._phase == "synthesize":
            assert self._inner is not None and self._cov_grid is not None
            assert self._mean_grid is not None
            meta |= {
                "cov_k": self._cov_k,
                "mean_k": self._mean_k,
                "fixed_target_dim": self._target_dim,
                "fixed_depth": self._depth,
                "n_synth": self._n_synth,
            }
            arrays = {
                "cov_grid": self._cov_grid,
                "mean_grid": self._mean_grid,
                "inner": np.frombuffer(self._inner.to_bytes(), dtype=np.uint8),
            }
        else:
            assert self._released is not None
            meta |= {"fixed_target_dim": self._target_dim, "fixed_depth": self._depth}
            arrays = {"release": np.frombuffer(self._released.to_bytes(), dtype=np.uint8)}
        return meta, arrays

    @classmethod
    def _from_state(
        cls, fields: MetaReader, arrays: Arrays, version: int, blob: bytes, rng: Any
    ) -> LowDimSynthesizer:
        """Every field is type- and range-checked and every array checked against the
        parameters before the object is built (the noise of a loaded object is the OS
        CSPRNG)."""
        domain = fields.domain()
        if not isinstance(domain, Box):
            raise SerializationError(f"{_KIND} blob header field 'domain' is not a Box")
        d = int(domain.d)
        split = fields.get("split", None)
        if (
            not isinstance(split, list)
            or len(split) != 3
            or any(isinstance(w, bool) or not isinstance(w, (int, float)) for w in split)
        ):
            raise SerializationError(
                f"{_KIND} blob header field 'split' must be three positive weights, got "
                f"{str(split)[:60]}"
            )
        opt = {
            name: (None if fields.get(name, None) is None else fields.int(name, minimum=0))
            for name in ("target_dim", "depth", "pca_rows", "expected_n")
        }
        phase = fields.str("phase", _PHASES)
        released = phase == "released"
        n_pca = fields.int("n_pca", minimum=0, maximum=_MAX_N, default=0 if released else None)
        frozen = fields.bool("frozen", default=False)
        expected = {"accumulate": {"s1", "s2"}, "synthesize": {"cov_grid", "mean_grid", "inner"}}
        if set(arrays) != expected.get(phase, {"release"}):
            raise SerializationError(
                f"{_KIND} blob in phase {phase!r} holds unexpected arrays {sorted(arrays)}"
            )
        # The arrays are checked against d before the constructor allocates the d × d sums.
        if phase == "accumulate":
            s1 = fields.array(arrays, "s1", np.int64, (d,))
            s2 = fields.array(arrays, "s2", np.int64, (d, d))
            if (s1 < 0).any() or (np.diagonal(s2) < 0).any() or not np.array_equal(s2, s2.T):
                raise SerializationError(f"{_KIND} blob sums 's1'/'s2' are not moment sums")
        elif phase == "synthesize":
            cov_grid = fields.array(arrays, "cov_grid", np.int64, (d, d))
            mean_grid = fields.array(arrays, "mean_grid", np.int64, (d,))
            if not np.array_equal(cov_grid, cov_grid.T):
                raise SerializationError(f"{_KIND} blob array 'cov_grid' is not symmetric")
        obj = cls(
            domain,
            fields.epsilon("epsilon"),
            target_dim=opt["target_dim"],
            method=fields.str("method", ("pmm", "psmm")),
            depth=opt["depth"],
            pca_rows=opt["pca_rows"],
            expected_n=opt["expected_n"],
            split=tuple(float(w) for w in split),
        )
        if obj._pca_rows is not None and n_pca > obj._pca_rows:
            raise SerializationError(
                f"{_KIND} blob header field 'n_pca' must be at most pca_rows = "
                f"{obj._pca_rows}, got {n_pca}"
            )
        obj._n_pca = n_pca
        obj._frozen = frozen
        if fields.has("lineage"):
            obj._lineage = fields.lineage()
        else:  # written before lineages were stored: every copy of this blob shares one
            obj._lineage = Lineage.of_legacy_blob(blob)
        if phase == "accumulate":
            obj._s1[...] = s1
            obj._s2[...] = s2
            return obj
        smallest = 3 if obj._method == "psmm" else 1
        target = fields.int("fixed_target_dim", minimum=smallest, maximum=d)
        limit = int(np.log2(MAX_CELLS)) if obj._method == "psmm" else _MAX_INNER_DEPTH
        depth = fields.int("fixed_depth", minimum=1, maximum=limit)
        for name, value in (("fixed_target_dim", target), ("fixed_depth", depth)):
            given = obj._target_dim_arg if name == "fixed_target_dim" else obj._depth_arg
            if given is not None and value != given:
                raise SerializationError(
                    f"{_KIND} blob header field {name!r} is {value}, but the parameters fix "
                    f"it to {given}"
                )
        obj._target_dim, obj._depth = target, depth
        if phase == "released":
            obj._released = fields.nested(arrays, "release", LowDimDistribution)
            if obj._released.target_dim != target:
                raise SerializationError(f"{_KIND} blob release does not have d' = {target}")
            obj._phase = "released"
            if not obj._lineage.released:
                obj._lineage.record(b"", obj._released)
            return obj
        if n_pca < 2:
            raise SerializationError(
                f"{_KIND} blob header field 'n_pca' must be >= 2 once the subspace is fixed, "
                f"got {n_pca}"
            )
        cov_k = private_pca.covariance_noise(d, n_pca, obj._parts["covariance"]).k
        mean_k = private_pca.mean_noise(d, n_pca, obj._parts["mean"]).k
        for name, want in (("cov_k", cov_k), ("mean_k", mean_k)):
            got = fields.int(name, minimum=-(2**20), maximum=2**20)
            if got != want:
                raise SerializationError(
                    f"{_KIND} blob header field {name!r} must be {want} (the grid of n_pca = "
                    f"{n_pca}), got {got}"
                )
        n_synth = fields.int("n_synth", minimum=0, maximum=2**62)
        inner = fields.nested(arrays, "inner", PMM if obj._method == "pmm" else PSMM)
        obj._install(cov_grid, cov_k, mean_grid, mean_k, None)
        assert obj._inner is not None
        if (
            type(inner) is not type(obj._inner)
            or inner.domain != obj._inner.domain
            or inner._level != obj._inner._level
        ):
            raise SerializationError(f"{_KIND} blob synthesis stage does not match its subspace")
        obj._inner = inner
        obj._n_synth = n_synth
        return obj

    def __repr__(self) -> str:
        return (
            f"LowDimSynthesizer(d={self._domain.d}, epsilon={self._epsilon!r}, "
            f"target_dim={self._target_dim!r}, method={self._method!r}, phase={self._phase!r})"
        )
