"""Build cost of the exact noise tables: CPU seconds per table, integer-only vs float-first.

    python benchmarks/bench_tables_build.py [--count 200] [--seed 0] [--repeats 3]

The parameters are those of the online synthesizer's noise: ``x = 1/scale = ε_r/4`` with ``ε_r``
floats spread log-uniformly over ``[1e-4, 4]`` (so rationals with 50-odd-bit denominators), the
table size ``m`` as the samplers choose it. For each kind of table (the Laplace magnitude, the
geometric and the truncated geometric) it prints the CPU seconds per table of the integer-only
construction (the reference; the builders' only route before) and of the builders as they are
now (float estimates, integer brackets for the entries the floats cannot prove), both for the
thresholds alone and for the whole table object, their ratio, and checks that every threshold is
the same. The builders' caches are bypassed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from sketchsyn.privacy import exactexp
from sketchsyn.privacy.noise import _table_size


def cpu_per_call(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Best of ``repeats`` runs of the CPU seconds of ``fn()`` divided by ``calls``."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best / calls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="distinct x values (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the ε_r values (default 0)")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs (default 3)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    eps = np.exp(rng.uniform(np.log(1e-4), np.log(4.0), args.count))
    params = [(x, _table_size(x)) for x in (Fraction(float(e)) / 4 for e in eps)]
    sizes = np.bincount([m for _, m in params]).nonzero()[0].tolist()
    print(f"{len(params)} distinct x = ε_r/4, ε_r in [1e-4, 4]; table sizes m: {sizes}")
    kinds = {
        "laplace": lambda x, m: exactexp.laplace_magnitude_table.__wrapped__(x, m),
        "geometric": lambda x, m: exactexp.geometric_table.__wrapped__(x, m, False),
        "truncated": lambda x, m: exactexp.geometric_table.__wrapped__(x, m, True),
    }
    groups = (("all m", params), ("m = 1024", [(x, m) for x, m in params if m == 1024]))
    for kind, build in kinds.items():
        for group, chosen in groups:
            todo = [(x, m) for x, m in chosen if kind != "truncated" or m > 1]
            if todo:
                report(kind, group, todo, build, args.repeats)


def report(
    kind: str,
    group: str,
    todo: list[tuple[Fraction, int]],
    build: Callable[[Fraction, int], exactexp.ThresholdTable],
    repeats: int,
) -> None:
    """Print the per-table CPU seconds of both constructions for ``todo``, and their ratio."""
    n = len(todo)
    same = all(
        np.array_equal(exactexp._exact_thresholds(kind, x, m), build(x, m)._thresholds)
        for x, m in todo
    )

    def old_floors() -> None:
        for x, m in todo:
            exactexp._exact_thresholds(kind, x, m)

    def new_floors() -> None:
        for x, m in todo:
            exactexp._fast_thresholds(kind, x, m)

    def old_tables() -> None:
        for x, m in todo:
            exactexp.ThresholdTable(exactexp._exact_thresholds(kind, x, m), lambda v: None)

    def new_tables() -> None:
        for x, m in todo:
            build(x, m)

    for label, old, new in (
        ("thresholds", old_floors, new_floors),
        ("whole table", old_tables, new_tables),
    ):
        t_old = cpu_per_call(old, n, repeats)
        t_new = cpu_per_call(new, n, repeats)
        print(
            f"{kind:9s} {group:8s} {label:11s} ({n:3d} tables): exact {t_old * 1e3:.3f} ms, "
            f"new {t_new * 1e3:.3f} ms per table, ratio {t_old / t_new:.1f}x"
        )
    print(f"{kind:9s} {group:8s} same thresholds as the exact construction: {same}")


if __name__ == "__main__":
    main()
