"""Single values as a schema reads and shows them: missing values, dates and times (ISO text with
or without a UTC offset, ``date`` and ``datetime`` objects as YAML makes them), and the text of a
value in an error message.

>>> _datetime_us("2013-05-01T10:00:00+02:00") == _datetime_us("2013-05-01T08:00:00Z")
True
>>> value_text(_dt.datetime(2013, 1, 20, 10)), is_missing(None)
("'2013-01-20T10:00:00'", True)
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import numpy as np

from .base import _row_text

__all__ = ["is_missing", "value_text"]

_EPOCH = np.datetime64(0, "us")


def is_missing(value: Any) -> bool:
    """True for a missing value: None, NaN, NaT, pandas' NA, or empty text.

    >>> [is_missing(v) for v in (None, float("nan"), np.datetime64("NaT"), "", "x", 0)]
    [True, True, True, True, False, False]
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):  # pandas.NA has no truth value
        return True


def _time_text(stamp: np.datetime64) -> str:
    """ISO text of a time, without a zero fraction or a midnight time of day.

    >>> _time_text(np.datetime64("2013-01-20T10:00", "us")), _time_text(np.datetime64(0, "us"))
    ('2013-01-20T10:00:00', '1970-01-01')
    """
    text = str(stamp.astype("datetime64[us]"))
    text = text[:-7] if text.endswith(".000000") else text
    return text[:-9] if text.endswith("T00:00:00") else text


def value_text(value: Any) -> str:
    """A value as an error message shows it: dates and times as quoted ISO text.

    >>> value_text(_dt.datetime(2013, 1, 20, 10)), value_text(np.datetime64("2013-01-20"))
    ("'2013-01-20T10:00:00'", "'2013-01-20'")
    """
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        return repr(value.isoformat())
    if isinstance(value, (_dt.date, np.datetime64)) and not is_missing(value):
        return repr(_time_text(np.datetime64(value, "us")))
    return _row_text(value)


# A time of day followed by a UTC offset: "Z", "+02:00", "-0530" or "+02".
_OFFSET = re.compile(r"(\d\d:\d\d(?::\d\d(?:[.,]\d*)?)?)\s*(Z|[+-]\d\d(?::?\d\d)?)$", re.I)


def _iso_text(value: Any) -> Any:
    """A ``date`` or ``datetime`` as ISO text (an aware one in UTC); other values unchanged.

    >>> _iso_text(_dt.date(2013, 1, 1)), _iso_text("2013-01-01")
    ('2013-01-01', '2013-01-01')
    >>> _iso_text(_dt.datetime(2013, 1, 1, 2, tzinfo=_dt.timezone(_dt.timedelta(hours=2))))
    '2013-01-01T00:00:00'
    """
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    return value


def _split_offset(text: str) -> tuple[str, int]:
    """ISO text without its UTC offset, and the offset in microseconds (numpy reads no offset
    without a warning, so it is applied here).

    >>> _split_offset("2013-05-01T10:00:00+02:00"), _split_offset("2013-05-01 10:00Z")
    (('2013-05-01T10:00:00', 7200000000), ('2013-05-01 10:00', 0))
    >>> _split_offset("2013-05-01")
    ('2013-05-01', 0)
    """
    m = _OFFSET.search(text)
    if m is None:
        return text, 0
    zone = m.group(2).upper()
    head = text[: m.start(2)].rstrip()
    if zone == "Z":
        return head, 0
    digits = zone[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + (int(digits[2:4]) if len(digits) > 2 else 0)
    return head, (1 if zone[0] == "+" else -1) * minutes * 60_000_000


def _datetime_us(value: Any) -> float:
    """Microseconds since 1970 of one date or time (ISO text, with or without a UTC offset,
    ``datetime``, ``datetime64``); a time with an offset is taken in UTC."""
    if isinstance(value, (bool, np.bool_, int, float, np.number)):
        raise ValueError(f"{value!r} is not a date or time")
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    if hasattr(value, "to_datetime64"):  # pandas Timestamp
        value = value.to_datetime64()
    shift = 0
    if isinstance(value, str):
        value, shift = _split_offset(value.strip())
    stamp = np.datetime64(value, "us")
    if np.isnat(stamp):
        raise ValueError(f"{value!r} is not a date or time")
    return float((stamp - _EPOCH).astype(np.int64) - shift)
