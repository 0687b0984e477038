"""Access logs end to end through the ``sketchsyn`` command, and the picture in ``docs/cli.md``.

    python benchmarks/ipv4_demo.py [--out docs/ipv4_map.png] [--n 200000]

Writes a simulated access log (80% of the requests from three busy /16 networks, the rest from
clients of 40 /8 networks with a Zipf-like popularity of their /16 networks), then runs
``sketchsyn fit`` (epsilon = 1), ``sample``, ``evaluate`` and ``plot`` on it and prints what
they print. The noise is seeded (``--noise-seed``) only so that the picture is reproducible; a
real release must not be.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_log(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    busy = np.array([(10 << 24) | (1 << 16), (172 << 24) | (16 << 16), (192 << 24) | (168 << 16)])
    keys = busy[rng.integers(0, 3, n)] + rng.integers(0, 1 << 16, n)
    rest = n // 5
    eights = rng.choice(np.arange(1, 224), 40, replace=False)
    sixteen = np.minimum(rng.zipf(1.3, rest) - 1, 255)
    keys[:rest] = (
        (eights[rng.integers(0, 40, rest)] << 24) | (sixteen << 16) | rng.integers(0, 1 << 16, rest)
    )
    rng.shuffle(keys)
    quads = [(k >> 24, (k >> 16) & 255, (k >> 8) & 255, k & 255) for k in keys.tolist()]
    path.write_text(
        "".join(
            f'{a}.{b}.{c}.{d} - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 512\n'
            for a, b, c, d in quads
        )
    )


def sketchsyn(*args: object) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "sketchsyn", *map(str, args)]
    print("$ sketchsyn " + " ".join(map(str, args[:1])) + " ...", flush=True)
    subprocess.run(cmd, check=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "ipv4_map.png"))
    parser.add_argument("--n", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log, model, syn = Path(tmp, "access.log"), Path(tmp, "ip.model"), Path(tmp, "syn.csv")
        write_log(log, args.n)
        sketchsyn("fit", log, "--epsilon", "1", "--noise-seed", "7", "-o", model, "-q")
        sketchsyn("sample", model, "-n", args.n, "-o", syn, "--seed", "1", "-q")
        sketchsyn("evaluate", log, syn)
        sketchsyn("plot", log, model, "-o", args.out, "--dpi", "70", "--seed", "1")


if __name__ == "__main__":
    main()
