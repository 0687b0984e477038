"""A larger run of the privacy audit of tests/test_privacy_audit.py (same harness, more trials).

    python benchmarks/bench_privacy_audit.py [--trials 20000]

For each private summary it prints the audited lower bound ε̂ on neighbouring inputs (with the
correct noise and with every scale halved inside this script), next to the claimed ε and the
largest loss the claimed noise allows on the pair.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_privacy_audit as harness  # noqa: E402

import sketchsyn.privacy.accounting as accounting  # noqa: E402


def _halved(enabled: bool) -> None:
    real = _halved.real  # type: ignore[attr-defined]
    fn = (lambda s, e, o, name="epsilon": real(s, e, o, name) / 2) if enabled else real
    for module in (accounting, harness.sketches, harness.baseline):
        module.laplace_scale = fn


_halved.real = accounting.laplace_scale  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20_000)
    args = parser.parse_args()
    print(
        f"{'mechanism':<16} {'eps':>5} {'pair max':>9} {'eps_hat':>8} {'eps_hat (2x)':>13} {'s':>6}"
    )
    for mech in harness.MECHANISMS:
        mech = dataclasses.replace(mech, trials=args.trials)
        start = time.perf_counter()
        _halved(False)
        eps_hat, top, _, _ = harness.audit(mech)
        _halved(True)
        eps_bad, _, _, _ = harness.audit(mech)
        _halved(False)
        print(
            f"{mech.name:<16} {mech.epsilon:>5.2f} {top:>9.3f} {eps_hat:>8.3f} {eps_bad:>13.3f} "
            f"{time.perf_counter() - start:>6.1f}"
        )


if __name__ == "__main__":
    main()
