"""Private synthetic IPv4 traffic from a web-server access log, read line by line.

    python examples/ip_log.py                # makes a small demo log first
    python examples/ip_log.py access.log     # any log whose first field is the client IPv4

The domain is the public 32-bit address space (``BitDomain(32)``): level l of the hierarchy is
the /l prefix, so hot subnets get fine cells and the rest stays coarse.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from sketchsyn import BitDomain, PrivHP


def client_ips(path: Path):
    """Yield each line's client address as an int (memory: one line)."""
    with path.open() as fh:
        for line in fh:
            a, b, c, d = line.split(" ", 1)[0].split(".")
            yield (int(a) << 24) | (int(b) << 16) | (int(c) << 8) | int(d)


def write_demo_log(path: Path, n: int) -> None:
    rng = np.random.default_rng(3)
    hot = rng.integers(0, 2**24, size=20) << 8  # twenty busy /24 networks
    with path.open("w") as fh:
        for i in range(n):
            ip = (
                int(hot[rng.integers(20)] + rng.integers(256))
                if i % 4
                else int(rng.integers(2**32))
            )
            octets = ".".join(str((ip >> s) & 255) for s in (24, 16, 8, 0))
            fh.write(f'{octets} - - [22/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 512\n')


def dotted(ip: int) -> str:
    return ".".join(str((ip >> s) & 255) for s in (24, 16, 8, 0))


def main(argv: list[str]) -> None:
    path = Path(argv[0]) if argv else Path(tempfile.gettempdir()) / "sketchsyn_access.log"
    if not argv:
        write_demo_log(path, 100_000)
    php = PrivHP(BitDomain(32), epsilon=1.0, k=64, width=1024, depth=24)
    n = php.consume(client_ips(path), batch_size=50_000)
    release = php.release()
    print(f"{n:,} requests, state {php.nbytes:,} bytes")
    top = np.argsort(release.leaves().count)[::-1][:5]
    leaves = release.leaves()
    for i in top:
        lo = int(leaves.lower[i][0]) if np.ndim(leaves.lower[i]) else int(leaves.lower[i])
        print(f"  {dotted(lo)}/{int(leaves.level[i])}: ~{leaves.count[i]:,.0f} requests")
    print("synthetic client addresses:", [dotted(int(ip)) for ip in release.sample(5)])


if __name__ == "__main__":
    main(sys.argv[1:])
