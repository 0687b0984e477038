"""Write the reference blobs of format version 1 (run once; the files are committed).

    python tests/data/make_reference_blobs.py

Later releases must still read these files and answer the same queries (tests/test_protocol.py).
"""

from pathlib import Path

import numpy as np

from sketchsyn import Box, CountMinSketch, CountSketch, PrivHP

HERE = Path(__file__).parent
KEYS = np.arange(1, 2001, dtype=np.uint64) % 97


def main() -> None:
    for cls in (CountMinSketch, CountSketch):
        s = cls(64, 3, epsilon=1.0, seed=5, rng=7)
        s.update_many(KEYS)
        (HERE / f"{cls.__name__}_v1.bin").write_bytes(s.to_bytes())
    php = PrivHP(Box.unit(2), epsilon=1.0, k=8, width=32, depth=8, seed=3, rng=11)
    php.update_many(np.random.default_rng(0).random((500, 2)))
    (HERE / "PrivHP_v1.bin").write_bytes(php.to_bytes())
    (HERE / "PrivateDistribution_v1.bin").write_bytes(php.release().to_bytes())


if __name__ == "__main__":
    main()
