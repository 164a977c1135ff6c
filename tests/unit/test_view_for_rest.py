"""What REST reads through the shell's view beside ``WorkerView``: ``GET /group``'s body and the limits of
what a worker's group metadata carries (``runtime/shell/view.py``), so that ``rest/`` needs nothing from the
group layer or storage."""

from __future__ import annotations

from kconnect.runtime.group.group_records import (
    Assigned,
    ConnectorsTasksValue,
    GroupState,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.view import MAX_TASK_NUMBER, describe_group, metadata_string_problem


def test_a_kafka_string_fits_and_one_past_its_length_is_named() -> None:
    assert metadata_string_problem("sink-1", "a static connector name") is None
    problem = metadata_string_problem("x" * 40_000, "a static connector name")
    assert problem is not None
    assert "a static connector name" in problem
    assert "40000 bytes" in problem


def test_task_numbers_stop_at_int32() -> None:
    assert MAX_TASK_NUMBER == 2**31 - 1


def test_group_description_lists_work_held_back_for_a_vanished_member() -> None:
    accounted = Assigned(frozenset({"a", "b"}), frozenset({TaskId("a", 0), TaskId("b", 0)}))
    share = Assigned(frozenset({"a"}), frozenset({TaskId("a", 0)}))
    state = GroupState(
        "connect-cluster",
        epoch=3,
        connectors_tasks=ConnectorsTasksValue(3, accounted),
        target=TargetAssignmentValue(3, (TargetMember("m1", 0, share, 1, b""),)),
        target_timestamp_ms=1_000,
    )
    body = describe_group(state, now_ms=2_000)
    assert body["group"] == "connect-cluster"
    assert body["epoch"] == 3
    assert body["held_back"] == {"connectors": ["b"], "tasks": ["b-0"]}


def test_group_description_of_a_group_without_a_target_holds_nothing_back() -> None:
    body = describe_group(GroupState("g"), now_ms=0)
    assert body["held_back"] == {"connectors": [], "tasks": []}
    assert body["target"] is None
