"""JSON text exactly as Apache Kafka Connect's Jackson writes it, and read as Jackson reads it.

Why one module: kconnect and Java workers share topics (the config, offset and status topics, and every
topic a ``JsonConverter`` writes), so a record kconnect writes must be byte-identical to the one a Java
worker would write for the same value, or compaction keys, offset keys and golden tests disagree. Python's
``json.dumps`` comes close but is not Jackson: it escapes control characters in lower-case hex, writes
characters outside the BMP raw, writes doubles with ``repr`` (``1e-05``, ``10000000000.0``) and a NaN as a
bare ``NaN``. Every writer of JSON for a Kafka record calls :func:`write` (or :func:`write_record`) here,
and every reader :func:`read`; ``tests/golden/java_json.txt`` holds Java's own bytes for the edge cases.

What Jackson 2.16's UTF-8 generator does, and so what this module does:

* Strings and object keys: ``"`` and ``\\`` get a backslash; ``\\b \\t \\n \\f \\r`` their short escapes;
  every other character below U+0020 a ``\\u00XX`` escape in upper-case hex. Every other BMP character
  is written raw as UTF-8 (DEL, C1 controls, U+2028 and U+FEFF included). A character outside the BMP is
  written as its two UTF-16 surrogates, each as a ``\\uXXXX`` escape (``\\uD83D\\uDE00``), and so is a
  lone surrogate, which also keeps the bytes valid UTF-8.
* Doubles: Java's ``Double.toString`` (:func:`java_double_str`); FLOAT32 values (marked with
  :class:`Float32`) ``Float.toString`` (:func:`java_float_str`). NaN and the infinities are written as the
  strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (Jackson's ``WRITE_NAN_AS_STRINGS``).
* Integers of any size as their digits (Jackson writes ``BigInteger`` so); ``Decimal`` with
  ``BigDecimal.toString``, whose rule (scientific notation when the exponent is positive or the adjusted
  exponent is below -6: ``1.23E+5``, ``1E-10``) is the one Python's ``str(Decimal)`` follows.

Digits of doubles: Python's shortest round-trip digits, which is what ``Double.toString`` prints from JDK 19
on; JDK 17 and older print a longer string for a few doubles (2.0E23 as 2.0000000000000002E23,
JDK-4511638). The golden cases avoid those doubles.

The reader accepts what Jackson's default ``ObjectMapper`` accepts, with one deliberate difference:
Jackson reads the first value and ignores whatever follows it (``[1]/*x*/`` reads as ``[1]``), which
kconnect refuses, so a corrupt record is reported rather than half read. NaN and Infinity, leading zeros,
trailing commas, single quotes and raw control characters in strings are refused, as Jackson refuses them.
"""

from __future__ import annotations

import decimal
import json
import math
import re
import struct
from collections.abc import Callable, Mapping
from typing import Final

__all__ = [
    "Float32",
    "JavaJsonError",
    "java_double_str",
    "java_float_str",
    "read",
    "write",
    "write_record",
]

_LONG_MIN: Final = -(2**63)
_LONG_MAX: Final = 2**63 - 1

_SHORT_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
_NEEDS_ESCAPE: Final = re.compile('[\x00-\x1f"\\\\\ud800-\udfff\U00010000-\U0010ffff]')
_NON_FINITE: Final = {math.inf: '"Infinity"', -math.inf: '"-Infinity"'}


class JavaJsonError(ValueError):
    """A value that cannot be written as JSON (or, with :func:`write_record`, would not read back)."""


class Float32(float):
    """A FLOAT32 value: Jackson writes it with ``Float.toString``, whose digits differ from a double's.

    Why a marker type: a Python float is always a double, so the Connect schema's FLOAT32 has to travel
    with the value from the converter to the writer.
    """


# ------------------------------------------------------------------------------------- Java's numbers


def java_double_str(value: float) -> str:
    """Java's ``Double.toString`` (``1.0``, ``1.0E7``, ``NaN``).

    Why: Jackson writes doubles with it, and Java's error messages and ConfigDef defaults print it, so
    kconnect's JSON and messages match Java's only if they format doubles the same way.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)  # Python writes this range without an exponent too
        return text if "." in text else text + ".0"
    return _computerized(_two_digits_when_one(repr(value), lambda t: float(t) == value, value))


def _two_digits_when_one(shortest: str, reads_back: Callable[[str], bool], value: float) -> str:
    """Java's rule when one significant digit suffices: the closest decimal of one or two digits.

    Why: Java prints at least two digits (``d.d``), and of the two-digit decimals that read back as the
    value it takes the closest, which differs from ``d.0`` for the least precise subnormals:
    ``Double.MIN_VALUE`` is ``4.9E-324``, not ``5.0E-324`` (and ``Float.MIN_VALUE`` ``1.4E-45``).
    """
    if len(decimal.Decimal(shortest).as_tuple().digits) != 1:
        return shortest
    exact = decimal.Decimal(value)  # the binary value, exactly
    two = f"{exact:.1e}"  # rounded half-even to two significant digits
    return two if reads_back(two) else shortest


def _computerized(digits_text: str) -> str:
    """Java's computerized scientific notation of a decimal text: ``d.dddEn`` (``1.0E-5``, ``-2.5E21``)."""
    sign, digits, exponent = decimal.Decimal(digits_text).as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(str(d) for d in digits).rstrip("0") or "0"
    point = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{point}"


def _shortest_float32_digits(value: float) -> str:
    packed = struct.pack(">f", value)
    for precision in range(1, 10):
        text = f"{value:.{precision}g}"
        try:
            if struct.pack(">f", float(text)) == packed:
                return text
        except OverflowError:
            continue  # rounded past the largest float32 (e.g. 3.4025e38 to 4 digits is 3.403e38)
    return repr(value)  # pragma: no cover - nine significant digits always round-trip a float32


def java_float_str(value: float) -> str:
    """Java's ``Float.toString``: the shortest digits that identify the float32, in Java's layout.

    Why not :func:`java_double_str`: 0.1f widened to a double prints 0.10000000149011612, while Java (and
    so Jackson) prints the float's own shortest digits, 0.1.
    """
    if math.isnan(value) or math.isinf(value) or value == 0:
        return java_double_str(value)
    digits = _shortest_float32_digits(value)
    if 1e-3 <= abs(value) < 1e7:
        return java_double_str(float(digits))
    packed = struct.pack(">f", value)
    return _computerized(_two_digits_when_one(digits, lambda t: struct.pack(">f", float(t)) == packed, value))


# ------------------------------------------------------------------------------------------- writing


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    short = _SHORT_ESCAPES.get(ch)
    if short is not None:
        return short
    cp = ord(ch)
    if cp >= 0x10000:
        cp -= 0x10000
        return f"\\u{0xD800 + (cp >> 10):04X}\\u{0xDC00 + (cp & 0x3FF):04X}"
    return f"\\u{cp:04X}"


def _quote(text: str) -> str:
    # Most texts are printable ASCII without a quote or backslash: nothing to escape, tested in C.
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    return '"' + _NEEDS_ESCAPE.sub(_escape, text) + '"'


#: Object keys as written, with their colon: a record's keys are its schema's few field names, again and
#: again. Bounded: emptied when full (keys of schemaless maps can be any text).
_KEYS: dict[str, str] = {}
_KEYS_MAX: Final = 10_000


def _key(k: str) -> str:
    quoted = _quote(k) + ":"
    if len(_KEYS) >= _KEYS_MAX:
        _KEYS.clear()
    _KEYS[k] = quoted
    return quoted


def _write(value: object, out: list[str], strict: bool) -> None:
    # The exact types most values are, first (a record's payload is mostly these): one type() test each.
    kind = type(value)
    if kind is str:
        out.append(_quote(value))  # type: ignore[arg-type]
        return
    if kind is dict:
        out.append("{")
        first = True
        for k, v in value.items():  # type: ignore[attr-defined]
            if type(k) is not str and not isinstance(k, str):
                raise JavaJsonError(f"JSON object keys must be strings, not {type(k).__name__}")
            if first:
                first = False
            else:
                out.append(",")
            quoted = _KEYS.get(k)
            if quoted is None:
                quoted = _key(k)
            out.append(quoted)
            # Leaves inline (most members are), without a call each.
            member = type(v)
            if member is str:
                out.append(_quote(v))
            elif v is None:
                out.append("null")
            elif member is int and not strict:
                out.append(str(v))
            else:
                _write(v, out, strict)
        out.append("}")
        return
    if kind is int and not strict:
        out.append(str(value))
        return
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if strict and not _LONG_MIN <= value <= _LONG_MAX:
            raise JavaJsonError(f"integer {value} does not fit in a Java long")
        out.append(str(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            if strict:
                raise JavaJsonError(f"{value!r} cannot be written: JSON has no representation for it")
            out.append('"NaN"' if math.isnan(value) else _NON_FINITE[value])
        else:
            out.append(java_float_str(value) if isinstance(value, Float32) else java_double_str(value))
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, decimal.Decimal):
        out.append(str(value))  # BigDecimal.toString's rule (module docstring)
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if not isinstance(k, str):
                raise JavaJsonError(f"JSON object keys must be strings, not {type(k).__name__}")
            if i:
                out.append(",")
            out.append(_quote(k))
            out.append(":")
            _write(v, out, strict)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out, strict)
        out.append("]")
    else:
        raise JavaJsonError(f"a {type(value).__name__} cannot be written as JSON")


def write(value: object) -> str:
    """Compact JSON text of ``value`` as Jackson writes it (module docstring), keys in the mapping's order.

    Why: the one writer behind every converter and internal record, so that kconnect's bytes are Java's.
    Takes None, bool, int, float (:class:`Float32` for FLOAT32), str, ``Decimal``, mappings with str keys,
    lists and tuples; raises :class:`JavaJsonError` for anything else.
    """
    out: list[str] = []
    _write(value, out, strict=False)
    return "".join(out)


def write_record(value: object) -> bytes:
    """UTF-8 bytes of ``value`` as :func:`write` makes them, refusing what would not read back the same.

    Why stricter: an internal-topic record (config, offset, status) is read back as the value it holds; a
    NaN (which Jackson writes as the string ``"NaN"``) or an integer beyond a Java long (which a Java
    worker reads into a long field) would come back as something else, so they are refused when written.
    """
    out: list[str] = []
    _write(value, out, strict=True)
    return "".join(out).encode("utf-8")


# ------------------------------------------------------------------------------------------- reading


def _reject_constant(name: str) -> object:
    raise JavaJsonError(f"{name} is not valid JSON")


def read(raw: str | bytes, *, exact: bool = False) -> object:
    """Parse JSON text (bytes in UTF-8, or UTF-16/32 with or without a BOM, as Jackson detects them).

    Why one reader: the same text must mean the same value wherever kconnect reads it. ``exact=True``
    reads non-integral numbers as ``Decimal`` (Connect's deserializer uses ``USE_BIG_DECIMAL_FOR_FLOATS``),
    so a NUMERIC decimal loses no digits; otherwise as floats. Integers of any size read as ints.
    Raises ``ValueError`` (``UnicodeDecodeError`` for undecodable bytes) for text Jackson would refuse.
    """
    if exact:
        return json.loads(raw, parse_float=decimal.Decimal, parse_constant=_reject_constant)
    return json.loads(raw, parse_constant=_reject_constant)
