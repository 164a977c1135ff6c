"""``kconnect apply``'s pure core (runtime/cli/apply_plan.py): files read into desired connectors, and the
plan against stored configs, as tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.cli.apply import read_desired, validation_errors
from kconnect.runtime.cli.apply_plan import (
    Desired,
    Kind,
    SpecError,
    collect,
    parse_connectors,
    plan,
    render_plan,
)

SRC = "org.apache.kafka.connect.file.FileStreamSourceConnector"


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [
        (
            "a.json",
            '{"name": "a", "config": {"connector.class": "X", "tasks.max": 2, "enabled": true}}',
            [("a", {"connector.class": "X", "tasks.max": "2", "enabled": "true", "name": "a"})],
        ),
        (
            "flat.json",
            '{"name": "a", "connector.class": "X", "file": "${file:/s.properties:path}"}',
            [("a", {"connector.class": "X", "file": "${file:/s.properties:path}", "name": "a"})],
        ),
        (
            "many.json",
            '[{"name": "a", "connector.class": "X"}, {"name": "b", "config": {"connector.class": "Y"}}]',
            [("a", {"connector.class": "X", "name": "a"}), ("b", {"connector.class": "Y", "name": "b"})],
        ),
        (
            "a.yaml",
            "name: a\nconfig:\n  connector.class: X\n  topics: [t1, t2]\n  tasks.max: 3\n",
            [("a", {"connector.class": "X", "topics": "t1,t2", "tasks.max": "3", "name": "a"})],
        ),
        (
            "two.YML",
            "name: a\nconnector.class: X\n---\nname: b\nconnector.class: Y\n",
            [("a", {"connector.class": "X", "name": "a"}), ("b", {"connector.class": "Y", "name": "b"})],
        ),
        (
            "a.properties",
            "name=a\nconnector.class=X\npassword=${env:PW}\n",
            [("a", {"name": "a", "connector.class": "X", "password": "${env:PW}"})],
        ),
    ],
)
def test_files_become_desired_connectors(
    source: str, text: str, expected: list[tuple[str, dict[str, str]]]
) -> None:
    got = parse_connectors(source, text)
    assert [(d.name, dict(d.config)) for d in got] == expected
    assert {d.source for d in got} == {source}


@pytest.mark.parametrize(
    ("source", "text", "problem"),
    [
        ("a.json", "{nope", "not valid JSON"),
        ("a.yaml", "name: [unclosed", "not valid YAML"),
        ("a.json", '{"config": {"connector.class": "X"}}', "names no connector"),
        ("a.json", '{"name": "a", "config": {}}', "has no 'connector.class'"),
        ("a.json", '{"name": "a", "config": {"connector.class": "X", "n": null}}', "'n' is null"),
        ("a.json", '{"name": "a", "config": {"connector.class": "X", "n": {"x": 1}}}', "'n' is dict"),
        (
            "a.json",
            '{"name": "a", "config": {"connector.class": "X", "name": "b"}}',
            "config's 'name' is 'b'",
        ),
        ("a.json", '{"name": "a", "config": {"connector.class": "X"}, "tasks": []}', "unexpected fields"),
        ("a.json", '"a string"', "must be an object"),
        ("a.yaml", "", "describes no connector"),
        ("a.txt", "name=a", "unknown file type"),
    ],
)
def test_bad_files_name_the_file_and_the_problem(source: str, text: str, problem: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_connectors(source, text)
    assert caught.value.source == source
    assert problem in caught.value.problem


def test_a_name_claimed_twice_is_an_error_naming_both_files() -> None:
    with pytest.raises(SpecError, match=r"b\.json: connector 'x' is also described in a\.json"):
        collect([Desired("x", {}, "a.json"), Desired("x", {}, "b.json")])


def d(name: str, **config: str) -> Desired:
    cfg = {k.replace("_", "."): v for k, v in config.items()}
    return Desired(name, {"connector.class": SRC, **cfg, "name": name}, f"{name}.json")


@pytest.mark.parametrize(
    ("desired", "current", "prune", "expected"),
    [
        # nothing on the cluster: everything is created
        ([d("a", file="x")], {}, False, [("a", Kind.CREATE)]),
        # stored as desired (the stored config carries name): unchanged
        (
            [d("a", file="x")],
            {"a": {"connector.class": SRC, "file": "x", "name": "a"}},
            False,
            [("a", Kind.UNCHANGED)],
        ),
        # a stored config without name compares equal too
        ([d("a", file="x")], {"a": {"connector.class": SRC, "file": "x"}}, False, [("a", Kind.UNCHANGED)]),
        # a value changed
        (
            [d("a", file="y")],
            {"a": {"connector.class": SRC, "file": "x", "name": "a"}},
            False,
            [("a", Kind.UPDATE)],
        ),
        # a key removed from the file is a change (PUT replaces the whole config)
        ([d("a")], {"a": {"connector.class": SRC, "file": "x", "name": "a"}}, False, [("a", Kind.UPDATE)]),
        # a reference compared as written, not as what it resolves to
        (
            [d("a", file="${env:F}")],
            {"a": {"connector.class": SRC, "file": "/resolved", "name": "a"}},
            False,
            [("a", Kind.UPDATE)],
        ),
        # on the cluster, in no file: kept without --prune, deleted with it
        (
            [d("a", file="x")],
            {"z": {"connector.class": SRC}},
            False,
            [("a", Kind.CREATE), ("z", Kind.UNMANAGED)],
        ),
        ([d("a", file="x")], {"z": {"connector.class": SRC}}, True, [("a", Kind.CREATE), ("z", Kind.DELETE)]),
    ],
)
def test_plan_table(
    desired: list[Desired],
    current: dict[str, dict[str, str]],
    prune: bool,
    expected: list[tuple[str, Kind]],
) -> None:
    got = plan(collect(desired), current, prune=prune)
    assert [(s.name, s.kind) for s in got.steps] == expected
    assert got.changes_anything == any(k in (Kind.CREATE, Kind.UPDATE, Kind.DELETE) for _, k in expected)


def test_update_lists_each_changed_key_and_sends_the_whole_desired_config() -> None:
    want = d("a", file="y", topic="t", connection_password="${file:/s:pw}")
    stored = {
        "connector.class": SRC,
        "file": "x",
        "tasks.max": "1",
        "name": "a",
        "connection.password": "old",
    }
    (step,) = plan(collect([want]), {"a": stored}, prune=False).steps
    assert [(c.key, c.old, c.new) for c in step.changes] == [
        ("connection.password", "old", "${file:/s:pw}"),
        ("file", "x", "y"),
        ("tasks.max", "1", None),
        ("topic", None, "t"),
    ]
    assert step.config == want.config
    text = render_plan(plan(collect([want]), {"a": stored}, prune=False), dry_run=True)
    # a literal credential is hidden, a reference shown as written
    assert "    ~ connection.password: [hidden] -> ${file:/s:pw}" in text.splitlines()
    assert "    - tasks.max = 1" in text.splitlines()
    assert "    + topic = t" in text.splitlines()
    assert "old" not in text
    assert (
        text.splitlines()[-1]
        == "apply: dry run, nothing changed: 0 to create, 1 to update, 0 unchanged, 0 to delete"
    )


def test_rendered_summary_counts_what_was_done_and_what_failed() -> None:
    the_plan = plan(
        collect([d("a", file="x"), d("b", file="y"), d("c", file="z")]),
        {"b": {"connector.class": SRC, "file": "y"}, "old": {"connector.class": SRC}, "gone": {}},
        prune=True,
    )
    text = render_plan(the_plan, dry_run=False, failed=["gone"])
    assert text.splitlines()[-1] == "apply: 2 created, 0 updated, 1 unchanged, 1 deleted, 1 failed"
    assert "+ a: create (a.json)" in text and "= b: unchanged (b.json)" in text and "- old: delete" in text


configs = st.dictionaries(
    st.sampled_from(["file", "topic", "tasks.max", "batch.size", "x"]),
    st.sampled_from(["1", "2", "a"]),
    max_size=4,
)


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), configs),
    st.dictionaries(st.sampled_from(["b", "c", "d"]), configs),
)
def test_applying_the_plan_reaches_the_desired_state_and_a_second_plan_changes_nothing(
    want: dict[str, dict[str, str]], have: dict[str, dict[str, str]]
) -> None:
    desired = collect(Desired(n, {"connector.class": SRC, **c, "name": n}, n) for n, c in want.items())
    # The worker stores a connector's name in its config, as Java's does.
    stored: dict[str, dict[str, str | None]] = {
        n: {"connector.class": SRC, **c, "name": n} for n, c in have.items()
    }
    for step in plan(desired, stored, prune=True).steps:
        if step.kind in (Kind.CREATE, Kind.UPDATE):
            stored[step.name] = dict(step.config)
        elif step.kind is Kind.DELETE:
            del stored[step.name]
    assert {n: dict(c) for n, c in stored.items()} == {n: dict(x.config) for n, x in desired.items()}
    again = plan(desired, stored, prune=True)
    assert not again.changes_anything
    assert all(s.kind is Kind.UNCHANGED for s in again.steps)


def test_a_directory_is_read_recursively_skipping_hidden_and_unknown_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "a.json").write_text('{"name": "a", "connector.class": "X"}')
    (tmp_path / "sub" / "b.yaml").write_text("name: b\nconnector.class: Y\n")
    (tmp_path / "c.properties").write_text("name=c\nconnector.class=Z\n")
    (tmp_path / "README.md").write_text("# not a connector")
    (tmp_path / ".git" / "x.json").write_text("{broken")
    assert sorted(read_desired([str(tmp_path)])) == ["a", "b", "c"]
    with pytest.raises(SpecError, match="no such file"):
        read_desired([str(tmp_path / "missing")])
    (tmp_path / "sub" / "b.yaml").write_text("name: a\nconnector.class: Y\n")
    with pytest.raises(SpecError, match="also described in"):
        read_desired([str(tmp_path)])


def test_validation_errors_are_listed_per_key() -> None:
    answer = {
        "error_count": 2,
        "configs": [
            {"value": {"name": "file", "errors": []}},
            {"value": {"name": "topic", "errors": ['Missing required configuration "topic"']}},
            {"value": {"name": "tasks.max", "errors": ["Value must be at least 1"]}},
        ],
    }
    assert validation_errors(answer) == [
        'topic: Missing required configuration "topic"',
        "tasks.max: Value must be at least 1",
    ]
    assert validation_errors({"error_count": 0, "configs": []}) == []
