"""The one Java-compatible JSON writer and reader: Jackson's own bytes (tests/golden/java_json.txt), tables
of Java's number formats, and round trips."""

from __future__ import annotations

import decimal
import json
import math
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.codecs.java_json import (
    Float32,
    JavaJsonError,
    java_double_str,
    java_float_str,
    read,
    write,
    write_record,
)
from kconnect.runtime.dataplane.connect_data import (
    ConnectSchema,
    decimal_schema,
    from_json_value,
    to_json_value,
)
from kconnect.runtime.storage import config_log as cl

GOLDEN = Path(__file__).parent.parent / "golden" / "java_json.txt"


def _golden() -> tuple[dict[str, bytes], dict[str, tuple[bytes, bytes | None]]]:
    writes: dict[str, bytes] = {}
    reads: dict[str, tuple[bytes, bytes | None]] = {}
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("#"):
            continue
        kind, name, *rest = line.split()
        if kind == "write":
            writes[name] = b"" if rest[0] == "-" else bytes.fromhex(rest[0])
        else:
            reads[name] = (bytes.fromhex(rest[0]), None if rest[1] == "error" else bytes.fromhex(rest[1]))
    return writes, reads


WRITES, READS = _golden()


def _float32(value: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", value))[0])


def _array(item: str) -> ConnectSchema:
    return ConnectSchema("array", items=ConnectSchema(item))


STRING = ConnectSchema("string")
# The values GoldenJavaJson.java gives JsonConverter (schemas.enable=false, decimal.format=NUMERIC).
WRITE_CASES: dict[str, tuple[ConnectSchema | None, Any]] = {
    "string_controls": (STRING, "".join(map(chr, range(0x20)))),
    "string_specials": (STRING, '"\\/ \x7f\x80\x9f\xa0\xe9\u2028\u2029\ufeff\uffff'),
    "string_non_bmp": (STRING, "a\U0001f600b\U00010000\U0010ffff"),
    "string_lone_high": (STRING, "x\ud800y"),
    "string_lone_low": (STRING, "x\udc00y"),
    "map_key_escapes": (
        ConnectSchema("map", keys=STRING, values=STRING),
        {"k\U0001f600\x00\x1b": "\u00ff\u0080\u07ff\u0800\uffff", "\n": "\U0001f600"},
    ),
    "doubles": (
        _array("double"),
        [
            0.0,
            -0.0,
            1.0,
            -2.5,
            0.1,
            0.001,
            9.999e-4,
            1e-5,
            1234567.0,
            9999999.0,
            1e7,
            1.0e10,
            123456.789,
            1.0 / 3,
            100.0,
            1e21,
            1e22,
            4.35,
            5e-324,
            sys.float_info.min,
            sys.float_info.max,
            math.nan,
            math.inf,
            -math.inf,
        ],
    ),
    "floats": (
        _array("float"),
        [_float32(v) for v in (0.1, -0.0, 1e10, 1e7, 9999999.0, 1e-3, 16777216.0, 3.4028235e38, 1.4e-45, 0.3)]
        + [math.nan, math.inf],
    ),
    "int64_bounds": (_array("int64"), [-(2**63), 2**63 - 1, 0, -1]),
    "int8_bounds": (_array("int8"), [-128, 127]),
    "decimal_big_integer": (decimal_schema(0), decimal.Decimal(-(2**100))),
    "decimal_negative_scale": (decimal_schema(-3), decimal.Decimal("123E3")),
    "decimal_small": (decimal_schema(10), decimal.Decimal("1E-10")),
    "decimal_fraction": (decimal_schema(4), decimal.Decimal("-12345678901234567890.1234")),
    "schemaless_mixed": (None, {"max": 2**63 - 1, "d": 2.5e-7, "s": "\x00\U0001f600"}),
}

#: Where kconnect reads differently from Jackson on purpose (see java_json's module docstring): Jackson
#: reads the first value and ignores what follows, kconnect refuses the text.
READ_DIVERGENCES = {"comment"}


def test_every_golden_case_has_a_python_value() -> None:
    assert set(WRITE_CASES) == set(WRITES)


@pytest.mark.parametrize("name", sorted(WRITE_CASES))
def test_written_bytes_are_jacksons(name: str) -> None:
    schema, value = WRITE_CASES[name]
    tree = to_json_value(schema, value, decimal_numeric=True)
    assert write(tree).encode("utf-8") == WRITES[name]


@pytest.mark.parametrize("name", sorted(READS))
def test_read_accepts_what_jackson_accepts(name: str) -> None:
    given_bytes, jackson = READS[name]
    if jackson is None or name in READ_DIVERGENCES:
        with pytest.raises(ValueError):
            read(given_bytes)
    else:
        assert write(read(given_bytes)).encode("utf-8") == jackson


# --- tables ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (1e-3, "0.001"),
        (9.99e-4, "9.99E-4"),
        (1e7, "1.0E7"),
        (9999999.5, "9999999.5"),
        (-1.5e-10, "-1.5E-10"),
        (123456789012.0, "1.23456789012E11"),
        (math.nan, "NaN"),
        (-math.inf, "-Infinity"),
    ],
)
def test_double_to_string(value: float, text: str) -> None:
    assert java_double_str(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.1, "0.1"), (1e10, "1.0E10"), (16777217.0, "1.6777216E7"), (1e-3, "0.001"), (2.5e-4, "2.5E-4")],
)
def test_float_to_string(value: float, text: str) -> None:
    assert java_float_str(_float32(value)) == text
    assert write(Float32(_float32(value))) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        ([], "[]"),
        ({}, "{}"),
        ((1, "a"), '[1,"a"]'),
        (2**64, "18446744073709551616"),
        (decimal.Decimal("1.50"), "1.50"),
        (decimal.Decimal("1E+3"), "1E+3"),
        (decimal.Decimal("0.0000001"), "1E-7"),
        (math.nan, '"NaN"'),
        ({"a": [1, {"b": None}], "c": True}, '{"a":[1,{"b":null}],"c":true}'),
    ],
)
def test_write_table(value: object, text: str) -> None:
    assert write(value) == text


# --- moved from test_config_log.py: the internal records' writer ------------------------------------


def test_java_json_escapes_keys_like_values() -> None:
    # Jackson 2.16 output for a key with an emoji and control characters (see module docstring).
    assert write_record({"k\U0001f600\x00\x1b": "\u00ff\u0080\u07ff\u0800\uffff"}) == (
        b'{"k\\uD83D\\uDE00\\u0000\\u001B":"\xc3\xbf\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf"}'
    )


def test_java_json_rejects_what_json_cannot_carry() -> None:
    for bad in (float("nan"), float("inf"), 2**63, {1: "a"}, {"a": object()}):
        with pytest.raises(ValueError):
            write_record(bad)


def test_write_refuses_what_is_not_json() -> None:
    for bad in ({1: "a"}, {"a": object()}, b"bytes", {1, 2}):
        with pytest.raises(JavaJsonError):
            write(bad)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_java_json_is_json_that_round_trips(value: object) -> None:
    encoded = write_record(value)
    assert json.loads(encoded) == value
    assert cl.parse_json("k", encoded) == value


def test_java_json_is_compact() -> None:
    assert write_record({"a": [1, {"b": None}], "c": True}) == b'{"a":[1,{"b":null}],"c":true}'


# --- round trips ----------------------------------------------------------------------------------------


@given(json_values)
def test_write_then_read_is_the_value(value: object) -> None:
    text = write(value)
    assert read(text) == value
    assert read(text.encode("utf-8")) == value
    # Jackson never writes a control character or a surrogate raw, and nothing outside ASCII escapes else.
    assert not any(ord(c) < 0x20 or 0xD800 <= ord(c) <= 0xDFFF or ord(c) > 0xFFFF for c in text)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_text_reads_back_as_the_same_double(value: float) -> None:
    text = java_double_str(value)
    assert float(text) == value and math.copysign(1, float(text)) == math.copysign(1, value)
    assert read(write(value)) == value


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float_text_reads_back_as_the_same_float32(value: float) -> None:
    assert struct.pack(">f", float(java_float_str(value))) == struct.pack(">f", value)


@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_exact_read_keeps_every_digit_of_a_decimal(value: decimal.Decimal) -> None:
    back = read(write([value]), exact=True)
    assert isinstance(back, list)
    assert back[0] == value


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_doubles_read_back_through_connect_data(value: float) -> None:
    # Jackson writes them as strings; a FLOAT64 reads such a string back as the double it names.
    node = read(write(to_json_value(ConnectSchema("double"), value)))
    back = from_json_value(ConnectSchema("double"), node)
    assert (math.isnan(back) and math.isnan(value)) or back == value
