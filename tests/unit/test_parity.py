"""The REST parity test's pure core (``tests/support/parity.py``) and the task-id binding it found wrong."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.rest.connectors import task_number
from kconnect.runtime.errors import NotFoundError
from tests.support.parity import (
    Answer,
    KnownDifference,
    Step,
    audit,
    compare,
    merge,
    shape,
    shape_differences,
    summary,
    without_status_versions,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "bool"),
        (3, "number"),
        (3.5, "number"),
        ("x", "str"),
        ([], []),
        ([1, 2.0], ["number"]),
        ([1, "a"], ["number|str"]),
        ({"b": 1, "a": [None, "x"]}, {"a": ["null|str"], "b": "number"}),
        # A status' tasks: one has a trace, one has none.
        (
            [{"id": 0, "state": "FAILED", "trace": "x"}, {"id": 1, "state": "RUNNING"}],
            [{"id": "number", "state": "str", "trace": "absent|str"}],
        ),
        ([[], [1]], [["number"]]),
        ([{"a": 1}, "s"], ["object|str"]),
    ],
)
def test_shape_table(value: Any, expected: Any) -> None:
    assert shape(value) == expected


def test_maps_merge_data_keys() -> None:
    java = {"root": {"level": "INFO", "last_modified": None}, "org.x": {"level": "DEBUG", "last_modified": 1}}
    ours = {"root": {"level": "INFO", "last_modified": None}}
    assert shape(java) != shape(ours)  # keys are field names by default
    assert shape(java, maps=("",)) == {"*": {"level": "str", "last_modified": "null|number"}}
    assert shape({}, maps=("",)) == {}
    nested = {"a": {"x": {"n": 1}, "y": {"n": 2}}}
    assert shape(nested, maps=("/a",)) == {"a": {"*": {"n": "number"}}}


@given(json_values)
def test_shape_of_a_value_merged_with_itself_is_itself(value: Any) -> None:
    s = shape(value)
    assert merge(s, s) == s
    assert shape_differences(s, s) == []


@given(json_values, json_values)
def test_merge_is_symmetric(a: Any, b: Any) -> None:
    assert merge(shape(a), shape(b)) == merge(shape(b), shape(a))


def test_shape_differences_name_the_path() -> None:
    java = shape({"connector": {"state": "RUNNING", "worker_id": "w"}, "tasks": [{"id": 0}]})
    ours = shape({"connector": {"state": "RUNNING"}, "tasks": [{"id": "0"}], "extra": True})
    assert shape_differences(java, ours) == [
        "/connector/worker_id: only in Java ('str')",
        "/extra: only in kconnect ('bool')",
        "/tasks/[]/id: Java 'number', kconnect 'str'",
    ]
    assert shape_differences(shape([]), shape([1])) == ["/: Java [], kconnect ['number']"]


def _outcome(name: str, java: tuple[int, Any], ours: tuple[int, Any]) -> Any:
    return compare(Step(name, "GET", "/x"), Answer(*java), Answer(*ours))


def test_compare_checks_codes_and_shapes_not_values() -> None:
    same = _outcome("a", (200, {"state": "RUNNING"}), (200, {"state": "UNASSIGNED"}))
    assert same.same
    code = _outcome(
        "b", (500, {"error_code": 500, "message": "m"}), (400, {"error_code": 400, "message": "n"})
    )
    assert code.differences == ("status: Java 500, kconnect 400",)
    body = _outcome("c", (200, {"tasks": []}), (200, {"tasks": [{"id": 0}]}))
    assert not body.same and body.differences[0].startswith("/tasks")


def test_audit_keeps_the_known_differences_table_honest() -> None:
    outcomes = [
        _outcome("same", (200, {}), (200, {})),
        _outcome("known", (500, None), (400, None)),
        _outcome("unknown", (404, None), (400, None)),
        _outcome("fixed", (200, None), (200, None)),
        _outcome("other-codes", (500, None), (409, None)),
    ]
    known = {
        "known": KnownDifference(500, 400, "a client's mistake"),
        "fixed": KnownDifference(500, 400, "no longer differs"),
        "other-codes": KnownDifference(500, 400, "codes changed"),
        "renamed": KnownDifference(500, 400, "no such step"),
    }
    problems = audit(outcomes, known)
    assert [p.split(":")[0] for p in problems] == ["unknown", "fixed", "other-codes", "renamed"]
    assert audit(outcomes[:2], {"known": known["known"]}) == []
    table = summary(outcomes, known).splitlines()
    assert table[0].split() == ["step", "request", "java", "kconnect", "result"]
    assert table[2].split()[-1] == "same" and table[3].split()[-1] == "known"
    assert table[4].split()[-1] == "DIFF"


@pytest.mark.parametrize(
    ("text", "expected"),
    # Integer.valueOf reads any Unicode decimal digit (Character.digit), as Python's int does.
    [("0", 0), ("7", 7), ("+1", 1), ("-1", -1), ("007", 7), ("2147483647", 2147483647), ("\u0661", 1)],
)
def test_task_number_binds_as_java_integer(text: str, expected: int) -> None:
    assert task_number(text) == expected


@pytest.mark.parametrize("text", ["zero", "", " 1", "1_0", "1.0", "0x1", "2147483648", "-2147483649", "+-1"])
def test_task_number_not_an_integer_is_javas_404(text: str) -> None:
    with pytest.raises(NotFoundError, match="HTTP 404 Not Found"):
        task_number(text)


def test_status_versions_are_set_aside_and_counted_nowhere_else() -> None:
    body = {
        "src": {
            "status": {
                "name": "src",
                "connector": {"state": "RUNNING", "worker_id": "w:1", "version": "0.1.0"},
                "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w:1", "version": "0.1.0"}],
            },
            # a plugin listing's version is no status's: kept
            "info": {"version": "3.9.0", "class": "x"},
        }
    }
    stripped, found = without_status_versions(body)
    assert found == 2
    assert stripped["src"]["status"]["connector"] == {"state": "RUNNING", "worker_id": "w:1"}
    assert stripped["src"]["status"]["tasks"] == [{"id": 0, "state": "RUNNING", "worker_id": "w:1"}]
    assert stripped["src"]["info"] == {"version": "3.9.0", "class": "x"}
    assert without_status_versions([{"state": "FAILED", "worker_id": "", "trace": "t"}]) == (
        [{"state": "FAILED", "worker_id": "", "trace": "t"}],
        0,
    )
