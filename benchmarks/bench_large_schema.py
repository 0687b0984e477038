"""Loading and refusing a release whose schema has many categories (issue 50, item 13).

A categorical column of ``--categories`` labels (default 10**6) goes into a PrivHP release;
the script times, in this process, ``Schema.from_dict``, ``from_bytes`` of the release's blob
and the refusal of the same blob with a NaN appended to the category list (re-packed with a
valid checksum), each the best of ``--repeat`` runs, and prints the blob's size.

    python benchmarks/bench_large_schema.py
    python benchmarks/bench_large_schema.py --categories 2e6 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import time

from sketchsyn import PrivHP, Schema
from sketchsyn.errors import SerializationError
from sketchsyn.io import serial


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--categories", type=float, default=1e6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cats = [f"c{i}" for i in range(int(args.categories))]
    entry = {"columns": [{"name": "x", "kind": "categorical", "categories": cats}]}
    schema = Schema.from_dict(entry)
    release = PrivHP(schema, 1.0, 8, 64, depth=6, rng=0).release()
    blob = release.to_bytes()
    got = serial.read(blob, type(release).__name__)
    meta = json.loads(json.dumps(got.meta))
    meta["domain"]["columns"][0]["categories"].append(float("nan"))
    text = json.dumps  # a NaN is not JSON: write it as the constant a forger would
    serial.json.dumps = lambda *a, **k: text(*a, **{**k, "allow_nan": True})  # type: ignore
    try:
        forged = serial.pack(got.kind, got.version, meta, got.arrays, state=got.state)
    finally:
        serial.json.dumps = text  # type: ignore[assignment]

    def refuse() -> None:
        try:
            type(release).from_bytes(forged)
        except SerializationError:
            return
        raise AssertionError("the forged blob loaded")

    print(f"{len(cats):,} categories, blob {len(blob):,} bytes (best of {args.repeat})")
    load = best(lambda: type(release).from_bytes(blob), args.repeat)
    print(f"  Schema.from_dict         {best(lambda: Schema.from_dict(entry), args.repeat):6.2f} s")
    print(f"  from_bytes (load)        {load:6.2f} s")
    print(f"  from_bytes (NaN refused) {best(refuse, args.repeat):6.2f} s")


if __name__ == "__main__":
    main()
