"""Write the reference blobs of format version 1 (run once; the files are committed).

    python tests/data/make_reference_blobs.py

Later releases must still read these files and answer the same queries (tests/test_protocol.py);
the answers are pinned in reference_answers_v1.json, written from the blobs by the code that
wrote them. Do not regenerate them for a new release: add files for a new format version.
"""

import json
from pathlib import Path

import numpy as np

from sketchsyn import Box, CountMinSketch, CountSketch, PrivateDistribution, PrivHP

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
    write_answers()


def write_answers() -> None:
    """Pin what the blobs decode to (run with the code that wrote them)."""
    out = {}
    q = list(range(0, 100, 7))
    for cls in (CountMinSketch, CountSketch):
        s = cls.from_bytes((HERE / f"{cls.__name__}_v1.bin").read_bytes())
        out[cls.__name__] = {
            "keys": q,
            "answers": np.asarray(s.query_many(q)).tolist(),
            "table_sum": int(s.table.sum()),
        }
    php = PrivHP.from_bytes((HERE / "PrivHP_v1.bin").read_bytes())
    out["PrivHP"] = {
        "n_seen": php.n_seen,
        "tree": php._tree.tolist(),
        "bank_sum": int(php._bank.sum()),
    }
    dist = PrivateDistribution.from_bytes((HERE / "PrivateDistribution_v1.bin").read_bytes())
    out["PrivateDistribution"] = {
        "total": float(dist.total),
        "n_leaves": int(dist.leaves().count.size),
        "count_half": float(dist.count([0, 0], [0.5, 1.0])),
    }
    (HERE / "reference_answers_v1.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
