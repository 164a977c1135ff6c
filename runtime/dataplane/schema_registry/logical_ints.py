"""Connect's Date, Time and Timestamp logical values as the integers they are written as, and back.

Connect's logical types sit on integers (Date: days since 1970-01-01 in an int32; Time: milliseconds of the
day in an int32; Timestamp: milliseconds since the epoch, UTC, in an int64). Avro's JSON defaults
(``avro_data``) and JSON Schema's values (``json_schema_data``) both write the integers; why one module: the
two conversions stood in both, so a fix to one (a rounding, a time zone) would have left the other behind.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from kconnect.runtime.dataplane.connect_data import DATE, TIME, TIMESTAMP

#: The logical type names whose values are written as integers.
LOGICAL_INTS: Final = frozenset({DATE, TIME, TIMESTAMP})

_EPOCH_DAY: Final = dt.date(1970, 1, 1)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def logical_to_int(name: str | None, value: Any) -> int | None:
    """The integer a Date (``dt.date``), Time (``dt.time``) or Timestamp (aware ``dt.datetime``) value is
    written as; None when ``name`` is not one of them or the value is not of its Python type (the caller
    then writes the value as it is)."""
    if name == DATE and isinstance(value, dt.date):
        return (value - _EPOCH_DAY).days
    if name == TIME and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if name == TIMESTAMP and isinstance(value, dt.datetime):
        return (value - _EPOCH) // dt.timedelta(milliseconds=1)
    return None


def logical_from_int(name: str, value: Any) -> dt.date | dt.time | dt.datetime:
    """The Python value of a Date, Time or Timestamp (``name`` in :data:`LOGICAL_INTS`) written as
    ``value``, an integer or a text or number that ``int()`` takes."""
    n = int(value)
    if name == DATE:
        return _EPOCH_DAY + dt.timedelta(days=n)
    if name == TIME:
        return (dt.datetime.min + dt.timedelta(milliseconds=n)).time()
    if name == TIMESTAMP:
        return _EPOCH + dt.timedelta(milliseconds=n)
    raise ValueError(f"{name!r} is not one of the logical types written as integers: {sorted(LOGICAL_INTS)}")
