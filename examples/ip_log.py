"""Private synthetic IPv4 traffic from a web-server access log, read in blocks of lines.

    python examples/ip_log.py                # makes a small demo log first
    python examples/ip_log.py access.log     # any log whose first field is the client address

The domain is the public 32-bit address space (``BitDomain(32)``): level l of the hierarchy is
the /l prefix, so hot subnets get fine cells and the rest stays coarse. The log is read by
sketchsyn's access-log reader: IPv6 clients are skipped and counted (they are not in the IPv4
domain), and so are junk lines (a torn line, a line of another format), so a real server's log
goes through whole.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from sketchsyn import AccessLogReader, BitDomain, PrivHP


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
    reader = AccessLogReader(str(path), batch_size=50_000, on_bad="skip")
    n = 0
    for keys in reader:  # uint64 client addresses of one block of lines
        php.update_many(keys)
        n += keys.size
    release = php.release()
    print(
        f"{n:,} requests, state {php.nbytes:,} bytes "
        f"({reader.n_ipv6:,} IPv6 and {reader.n_bad:,} junk lines skipped)"
    )
    leaves = release.leaves()
    top = np.argsort(leaves.count)[::-1][:5]
    print("busiest networks of the release (noisy counts: a count is its network's requests")
    print("plus Laplace noise of the scale shown, and on the sketch levels plus the requests of")
    print("the addresses that share its Count-Min cell, which only add):")
    for i in top:
        lo = int(leaves.lower[i][0]) if np.ndim(leaves.lower[i]) else int(leaves.lower[i])
        level = int(leaves.level[i])
        scale = float(php.noise_scales[level])
        where = "counter" if level <= php.counter_depth else "sketch"
        print(
            f"  {dotted(lo)}/{level}: {leaves.count[i]:,.0f} requests "
            f"(noise scale {scale:,.0f}, a {where} level)"
        )
    print("synthetic client addresses:", [dotted(int(ip)) for ip in release.sample(5)])


if __name__ == "__main__":
    main(sys.argv[1:])
