"""Data generators for demos, tests and benchmarks (seeded, lazily streamed).

``taxi_pickups`` simulates a city's ride pickups: a few dense hotspots (stations, airport,
downtown), traffic along a street grid and a uniform background, in a public bounding box of
longitude/latitude. ``multifractal`` is the binary multiplicative cascade of Holland et al. §3.3,
the
paper's skewed test distribution.

>>> X = next(taxi_pickups(1000, batch_size=1000, seed=0))
>>> X.shape, bool(((X >= TAXI_BOX[0]) & (X <= TAXI_BOX[1])).all())
((1000, 2), True)
>>> Y = multifractal(4096, d=2, B=0.8, depth=16, seed=0)
>>> Y.shape, float(Y.min()) >= 0.0, float(Y.max()) < 1.0
((4096, 2), True, True)
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import check_int, check_positive

__all__ = ["TAXI_BOX", "multifractal", "taxi_pickups"]

#: Public bounds (lower, upper) of the simulated city: (longitude, latitude).
TAXI_BOX = (np.array([-74.05, 40.60]), np.array([-73.75, 40.90]))

_HOTSPOTS = np.array(
    [  # lon, lat, spread (deg), weight
        [-73.985, 40.758, 0.004, 0.22],  # midtown
        [-73.990, 40.750, 0.002, 0.10],  # station
        [-74.009, 40.711, 0.003, 0.12],  # downtown
        [-73.872, 40.774, 0.002, 0.08],  # airport 1
        [-73.790, 40.645, 0.003, 0.06],  # airport 2
        [-73.950, 40.780, 0.006, 0.10],  # upper east side
        [-73.955, 40.715, 0.008, 0.07],  # across the river
    ]
)


def taxi_pickups(n: int, batch_size: int = 65536, seed: int | None = 0) -> Iterator[np.ndarray]:
    """Yield ``n`` simulated pickup locations (lon, lat) in batches of ``batch_size`` rows.

    About 75% of pickups fall around hotspots, 20% along a grid of avenues and streets, 5% uniformly
    in the box. It is a generator, so a stream of any length uses one batch of memory.
    """
    n = check_int(n, "n", "taxi_pickups", minimum=0)
    batch_size = check_int(batch_size, "batch_size", "taxi_pickups", minimum=1)
    rng = np.random.default_rng(seed)
    lo, hi = TAXI_BOX
    weights = _HOTSPOTS[:, 3] / _HOTSPOTS[:, 3].sum()
    done = 0
    while done < n:
        m = min(batch_size, n - done)
        kind = rng.choice(3, size=m, p=[0.75, 0.20, 0.05])
        out = rng.uniform(lo, hi, size=(m, 2))
        hot = kind == 0
        spot = rng.choice(len(_HOTSPOTS), size=int(hot.sum()), p=weights)
        out[hot] = _HOTSPOTS[spot, :2] + rng.standard_normal((spot.size, 2)) * _HOTSPOTS[spot, 2:3]
        street = kind == 1
        s = int(street.sum())
        along = rng.uniform(0, 1, size=s)
        avenue = rng.integers(0, 12, size=s)
        vertical = rng.random(s) < 0.5
        x = np.where(vertical, -74.02 + 0.02 * avenue, -74.04 + 0.24 * along)
        y = np.where(vertical, 40.62 + 0.26 * along, 40.64 + 0.02 * avenue)
        out[street] = np.column_stack([x, y]) + rng.standard_normal((s, 2)) * 0.0005
        np.clip(out, lo, hi, out=out)
        done += m
        yield out


def multifractal(
    n: int, d: int = 2, B: float = 0.8, depth: int = 20, seed: int | None = 0
) -> np.ndarray:
    """``n`` points of the binary multiplicative cascade on ``[0, 1)^d`` (Holland et al. §3.3).

    At each of ``depth`` levels a point goes to the first half of the current cell (cutting the
    coordinates round robin) with probability ``B`` and to the second half with ``1 − B``, then it
    is placed uniformly in its final cell. ``B = 0.5`` is uniform; larger ``B`` is more skewed.
    """
    n = check_int(n, "n", "multifractal", minimum=0)
    d = check_int(d, "d", "multifractal", minimum=1)
    depth = check_int(depth, "depth", "multifractal", minimum=1, maximum=60)
    B = check_positive(B, "B", "multifractal")
    rng = np.random.default_rng(seed)
    corner = np.zeros((n, d))
    side = np.ones(d)
    for level in range(depth):
        axis = level % d
        side[axis] /= 2.0
        second_half = rng.random(n) >= B
        corner[second_half, axis] += side[axis]
    return corner + rng.random((n, d)) * side
