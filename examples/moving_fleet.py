"""A fleet whose positions are published privately at announced times, in fixed memory.

    python examples/moving_fleet.py [--vehicles 20000] [--hours 24] [--releases 8] [--epsilon 1]
    python examples/moving_fleet.py --vehicles 4000 --hours 8 --releases 4   # a quick look

Vehicles drive around a city (longitude, latitude in a public box). Every hour one vehicle in
four reports a new position: its old point is deleted and its new one inserted (two events).
The operator announces in advance that synthetic positions will be published ``--releases``
times over the day, so :class:`~sketchsyn.StreamingPrivTree` steps its partition on that
schedule (at each release the epoch is closed with empty events: ``skip(epoch_end - t)``);
every release is covered by the one ε of the whole day (event level: one insertion or
one deletion). At each release the script prints W1 between the live positions and the release
(exact optimal transport between 2 000 points of each, in the unit box's ℓ∞ metric; POT is
needed), the share of vehicles in the busiest district against the release's, and the state
bytes, which do not grow.

The state holds the open step's exact counts (a trusted curator's state): keep it where the raw
positions are kept; publish only releases.
"""

from __future__ import annotations

import argparse

import numpy as np

from sketchsyn import Box, StreamingPrivTree
from sketchsyn.evaluate.metrics import wasserstein1

CITY = Box([2.20, 48.80], [2.45, 48.92])  # public bounds (degrees)
DISTRICT = ([2.30, 48.84], [2.36, 48.88])  # the centre


def positions(rng: np.random.Generator, n: int, hour: float) -> np.ndarray:
    """Where ``n`` vehicles are at ``hour``: the centre by day, spread out at night."""
    day = np.cos(2 * np.pi * (hour - 13) / 24) * 0.5 + 0.5
    centre = np.array([2.33, 48.86])
    spread = 0.012 + 0.03 * (1 - day)
    pts = centre + rng.normal(0, spread, size=(n, 2)) * [1.6, 1.0]
    return np.clip(pts, CITY.lower, CITY.upper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vehicles", type=int, default=20_000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--releases", type=int, default=8)
    parser.add_argument("--epsilon", type=float, default=1.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n, movers = args.vehicles, args.vehicles // 4
    release_hours = {round(args.hours * i / args.releases) for i in range(1, args.releases + 1)}
    # Public: the fleet size and the reporting rule bound the events of an epoch; each release
    # skips to its epoch's end (empty events), so a release describes every event so far.
    per_epoch = n + 2 * movers * -(-args.hours // args.releases)
    fleet = StreamingPrivTree(
        CITY, args.epsilon, horizon=per_epoch * args.releases, releases=args.releases
    )
    live = positions(rng, n, 0.0)
    fleet.update_many(live)
    print("| hour | W1 (OT, 2000 pts) | in the centre: data / synthetic | leaves | state bytes |")
    print("| --- | --- | --- | --- | --- |")
    for hour in range(1, args.hours + 1):
        who = rng.choice(n, movers, replace=False)
        old, new = live[who].copy(), positions(rng, movers, hour)
        fleet.update_many(new)
        fleet.remove_many(old)
        live[who] = new
        if hour in release_hours:
            fleet.skip(fleet.epoch_end - fleet.t)  # close the epoch now: the announced time
            release = fleet.release()
            sample = live[rng.choice(n, min(n, 2000), replace=False)]
            w1 = wasserstein1(sample, release, CITY, method="ot", n_samples=2000, rng=hour).value
            inside = np.all((live >= DISTRICT[0]) & (live <= DISTRICT[1]), axis=1).mean()
            share = release.count(*DISTRICT) / max(release.total, 1.0)
            print(f"| {hour} | {w1:.4f} | {inside:.3f} / {share:.3f} | {fleet.n_leaves} | "
                  f"{fleet.nbytes:,} |")  # fmt: skip


if __name__ == "__main__":
    main()
