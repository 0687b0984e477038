"""The k-ary tree with negative digits against the binary tree and Honaker's estimator.

Run:  PYTHONPATH=. python3 benchmarks/bench_karytree.py [--runs 200] [--steps 1000000]

Prints
* for T = 2^10, 2^16, 2^20: the mean and the max over t ≤ T of the variance of the released
  prefix sum (closed forms, units 1/ε², ε = 1) of the binary tree (``BinaryMechanism``),
  Honaker's estimator (``estimator="honaker"``) and ``KaryTreeCounter`` (default k = 19), with
  the ratios; and the odd k ≤ 31 with the lowest max variance at that T (for reference: the
  default stays the paper's k = 19). Each closed form is vectorised over t and checked against
  the counters' own ``variance(t)`` at a handful of t;
* measured RMSE over all t ≤ 2^12 (``--runs`` seeded runs, dense stream of ones) beside the
  closed-form RMSE (square root of the mean variance);
* ``update_many`` steps/s on a dense Boolean stream of ``--steps`` steps (wall clock on a
  shared machine: noisy), k-ary tree beside the binary tree.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sketchsyn.counters import BinaryMechanism
from sketchsyn.counters.base import _noise_variance
from sketchsyn.counters.karytree import KaryTreeCounter, balanced_digits, karytree_levels


def _binary(horizon: int, ts: np.ndarray) -> np.ndarray:
    tree = BinaryMechanism(epsilon=1.0, horizon=horizon, rng=0)
    v = tree.variance(1)  # one p-sum
    out = np.bitwise_count(ts) * v
    for t in (1, int(ts[-1]), int(ts[len(ts) // 3])):
        assert abs(out[t - 1] - tree.variance(t)) <= 1e-9 * out[t - 1]
    return out


def _honaker(horizon: int, ts: np.ndarray) -> np.ndarray:
    est = BinaryMechanism(epsilon=1.0, horizon=horizon, estimator="honaker", rng=0)
    vj = est._tree.vj  # V_j of a closed level-j node (the estimator's own table)
    out = np.zeros(ts.size)
    for j, v in enumerate(vj):
        out += ((ts >> j) & 1) * v
    for t in (1, int(ts[-1]), int(ts[len(ts) // 3])):
        assert abs(out[t - 1] - est.variance(t)) <= 1e-9 * out[t - 1]
    return out


def _kary(horizon: int, ts: np.ndarray, k: int = 19) -> np.ndarray:
    h = karytree_levels(horizon, k)
    c = KaryTreeCounter(1.0, horizon, k=k, rng=0)
    out = np.abs(balanced_digits(ts, k, h)).sum(axis=0) * _noise_variance("laplace", c.scale)
    for t in (1, int(ts[-1]), int(ts[len(ts) // 3]), int(np.argmax(out)) + 1):
        assert abs(out[t - 1] - c.variance(t)) <= 1e-9 * out[t - 1]
    return out


def closed_forms() -> None:
    print("Variance of the release, closed forms, units 1/eps^2 (mean and max over t <= T)")
    head = f"{'T':>6} | {'binary':>15} | {'Honaker':>15} | {'k-ary k=19':>15} |"
    print(head + " binary/k-ary  Honaker/k-ary | best odd k (max)")
    for e in (10, 16, 20):
        horizon = 2**e
        ts = np.arange(1, horizon + 1, dtype=np.int64)
        b, hon, kar = _binary(horizon, ts), _honaker(horizon, ts), _kary(horizon, ts)
        best = min(range(3, 32, 2), key=lambda k: _kary(horizon, ts, k).max())
        best_max = _kary(horizon, ts, best).max()
        print(
            f"{'2^' + str(e):>6} | {b.mean():7.0f} {b.max():7.0f} | {hon.mean():7.0f} "
            f"{hon.max():7.0f} | {kar.mean():7.0f} {kar.max():7.0f} | "
            f"{b.mean() / kar.mean():4.2f} {b.max() / kar.max():4.2f}   "
            f"{hon.mean() / kar.mean():4.2f} {hon.max() / kar.max():4.2f}    | "
            f"k={best} ({best_max:.0f}, h={karytree_levels(horizon, best)})"
        )
    print("  (each pair: mean max; ratios: mean max)")


def measured_rmse(runs: int, horizon: int = 2**12) -> None:
    xs = np.ones(horizon, dtype=np.int64)
    truth = np.cumsum(xs)
    ts = np.arange(1, horizon + 1, dtype=np.int64)
    makers = {
        "binary": (
            lambda i: BinaryMechanism(epsilon=1.0, horizon=horizon, rng=i),
            _binary(horizon, ts),
        ),
        "Honaker": (
            lambda i: BinaryMechanism(epsilon=1.0, horizon=horizon, estimator="honaker", rng=i),
            _honaker(horizon, ts),
        ),
        "k-ary k=19": (
            lambda i: KaryTreeCounter(1.0, horizon, rng=i),
            _kary(horizon, ts),
        ),
    }
    print(f"\nMeasured RMSE over all t <= {horizon}, {runs} seeded runs, dense stream of ones")
    rmse = {}
    for name, (make, var) in makers.items():
        sq = 0.0
        for i in range(runs):
            err = make(1000 + i).update_many(xs) - truth
            sq += float(np.square(err, dtype=np.float64).sum())
        rmse[name] = np.sqrt(sq / (runs * horizon))
        print(f"  {name:11s} measured {rmse[name]:6.2f}   closed form {np.sqrt(var.mean()):6.2f}")
    k = rmse["k-ary k=19"]
    b, hon = rmse["binary"] / k, rmse["Honaker"] / k
    print(
        f"  RMSE ratio binary/k-ary {b:.2f} (variance {b**2:.2f}), "
        f"Honaker/k-ary {hon:.2f} (variance {hon**2:.2f})"
    )


def throughput(n: int) -> None:
    xs = (np.random.default_rng(0).random(n) < 0.5).astype(np.int64)
    print(f"\nupdate_many, Boolean stream of {n:.0e} steps (horizon {n})")
    for name, make in (
        ("KaryTreeCounter k=19", lambda: KaryTreeCounter(1.0, n, rng=1)),
        ("BinaryMechanism", lambda: BinaryMechanism(epsilon=1.0, horizon=n, rng=1)),
    ):
        make().update_many(xs[:1000])  # warm-up: the exact sampler's tables for this scale
        c = make()
        start = time.perf_counter()
        c.update_many(xs)
        print(f"  {name:21s} {n / (time.perf_counter() - start):12,.0f} steps/s")
    c = KaryTreeCounter(1.0, 2**40, rng=1)
    start = time.perf_counter()
    c.skip(10**9)
    print(
        f"  KaryTreeCounter skip(10^9), horizon 2^40: {1e3 * (time.perf_counter() - start):.2f} ms"
    )


def bank_throughput(size: int = 10_000, steps: int = 1000) -> None:
    """KaryTreeBank against CounterBank: ``steps`` steps of ``size`` counters in one call."""
    from sketchsyn.counters import CounterBank, KaryTreeBank

    xs = (np.random.default_rng(1).random((steps, size)) < 0.5).astype(np.int64)
    print(f"\nbanks of {size:,} counters, one update_many of {steps:,} steps (horizon 2^17)")
    for name, make in (
        ("KaryTreeBank k=19", lambda: KaryTreeBank(size, 1.0, 2**17, rng=1)),
        ("CounterBank (binary)", lambda: CounterBank(size, 1.0, 2**17, rng=1)),
    ):
        make().update_many(xs[:10])  # warm-up
        bank = make()
        start = time.perf_counter()
        bank.update_many(xs)
        rate = steps * size / (time.perf_counter() - start)
        start = time.perf_counter()
        bank.skip(10**5)
        skip_ms = 1e3 * (time.perf_counter() - start)
        print(f"  {name:21s} {rate:12,.0f} counter-steps/s; skip(10^5) {skip_ms:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10**6)
    args = parser.parse_args()
    closed_forms()
    measured_rmse(args.runs)
    throughput(args.steps)
    bank_throughput()


if __name__ == "__main__":
    main()
