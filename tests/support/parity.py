"""Pure pieces of the REST parity test: JSON "shapes", the step table's types, and the comparison.

A parity test sends the same requests to the reference Apache Kafka Connect worker and to kconnect and
compares what comes back. Values legitimately differ (worker ids, versions, task states, plugin lists),
so answers are compared by their *shape*: the type skeleton of the JSON, with dict keys kept, list
elements merged into one element shape and scalars reduced to type names. Two answers with the same
shape have the same fields of the same types wherever either side has data.

Everything here is a pure function over plain data, so it is unit-tested without a worker
(``tests/unit/test_parity.py``); the I/O lives in ``tests/integration/test_rest_parity.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: A shape: a type name ("str", "number", "bool", "null", or a union such as "null|str"), a dict of key
#: to shape, or a list holding at most one shape (the merged shape of every element; empty: no elements).
Shape = str | dict[str, "Shape"] | list["Shape"]

#: The shape of a key that some merged dicts have and others lack.
ABSENT = "absent"
#: Path component for "any key of a dict whose keys are data" and "any element of a list".
ANY_KEY = "*"
ELEMENT = "[]"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: bool is an int in Python
        return "bool"
    if isinstance(value, int | float):
        # Jackson writes 1 and 1.0 for the same Java double; the type that matters is "a number".
        return "number"
    if isinstance(value, str):
        return "str"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def shape(value: Any, maps: Iterable[str] = (), *, _path: str = "") -> Shape:
    """The type skeleton of a decoded JSON value.

    ``maps`` lists paths (``""`` is the root, ``"/key"`` a member, ``"/[]"`` any list element, ``"/*"``
    any key of a map) of dicts whose keys are data, not field names (``GET /admin/loggers`` keys loggers
    by name): their values are merged under the single key ``"*"``, so two maps of different loggers
    with the same kind of entries have the same shape.
    """
    map_paths = frozenset(maps)
    if isinstance(value, dict):
        if _path in map_paths:
            merged: Shape | None = None
            for item in value.values():
                s = shape(item, map_paths, _path=f"{_path}/{ANY_KEY}")
                merged = s if merged is None else merge(merged, s)
            return {ANY_KEY: merged} if merged is not None else {}
        return {str(k): shape(v, map_paths, _path=f"{_path}/{k}") for k, v in sorted(value.items())}
    if isinstance(value, list):
        merged_el: Shape | None = None
        for item in value:
            s = shape(item, map_paths, _path=f"{_path}/{ELEMENT}")
            merged_el = s if merged_el is None else merge(merged_el, s)
        return [] if merged_el is None else [merged_el]
    return _scalar(value)


def _kind(s: Shape) -> set[str]:
    if isinstance(s, dict):
        return {"object"}
    if isinstance(s, list):
        return {"array"}
    return set(s.split("|"))


def merge(a: Shape, b: Shape) -> Shape:
    """One shape describing both: dict keys united (a key one side lacks becomes ``absent|...``), list
    element shapes merged (an empty list adds nothing), and differing kinds become a union of names."""
    if a == b:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        out: dict[str, Shape] = {}
        for key in sorted(set(a) | set(b)):
            if key in a and key in b:
                out[key] = merge(a[key], b[key])
            else:
                out[key] = merge(a.get(key, ABSENT), b.get(key, ABSENT))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if not a or not b:
            return a or b
        return [merge(a[0], b[0])]
    return "|".join(sorted(_kind(a) | _kind(b)))


def shape_differences(java: Shape, ours: Shape, path: str = "") -> list[str]:
    """Where two shapes differ, one line per place, naming the path and both sides (empty: equal)."""
    if java == ours:
        return []
    if isinstance(java, dict) and isinstance(ours, dict):
        out: list[str] = []
        for key in sorted(set(java) | set(ours)):
            if key not in ours:
                out.append(f"{path}/{key}: only in Java ({_brief(java[key])})")
            elif key not in java:
                out.append(f"{path}/{key}: only in kconnect ({_brief(ours[key])})")
            else:
                out.extend(shape_differences(java[key], ours[key], f"{path}/{key}"))
        return out
    if isinstance(java, list) and isinstance(ours, list) and java and ours:
        return shape_differences(java[0], ours[0], f"{path}/{ELEMENT}")
    return [f"{path or '/'}: Java {_brief(java)}, kconnect {_brief(ours)}"]


def _brief(s: Shape, limit: int = 80) -> str:
    text = repr(s)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Step:
    """One request of the parity sequence, sent identically to both workers.

    ``body`` is JSON to send; ``raw`` bytes are sent as they are (malformed bodies). ``until`` makes
    the step poll (on both sides, each on its own) until the answer satisfies it, for Java's
    asynchronous effects; ``maps`` is passed to :func:`shape`. ``values`` picks what of the body must be
    equal on both sides, beyond its shape (the states connectors and tasks reach, the topics they used).
    ``settle_s`` waits before the first request, for an effect whose start no answer shows (Java answers a
    restart before its herder has begun it, so the state it restarts from is still the one to read).
    """

    name: str
    method: str
    path: str
    body: Any = None
    raw: bytes | None = None
    until: Callable[[int, Any], bool] | None = None
    maps: tuple[str, ...] = ()
    values: Callable[[Any], Any] | None = None
    settle_s: float = 0.0


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any  # decoded JSON, or None for an empty body, or the text when it is not JSON
    polls: int = 1


@dataclass(frozen=True)
class KnownDifference:
    """A difference the test expects: Java's and kconnect's status codes, and why it is justified.

    Equal codes mean the difference is in the body's shape.
    """

    java_status: int
    kconnect_status: int
    why: str


@dataclass(frozen=True)
class Outcome:
    step: Step
    java: Answer
    ours: Answer
    differences: tuple[str, ...] = field(default=())

    @property
    def same(self) -> bool:
        return not self.differences


def without_status_versions(body: Any) -> tuple[Any, int]:
    """``body`` without the ``version`` of its connector and task statuses, and how many there were.

    Apache Kafka 4.1 (KIP-891) reports the plugin version running in every status entry; the reference
    is Connect 3.9, which has no such field. Set aside on kconnect's side only, and counted so the test
    can check kconnect did report them: every other field is still compared.
    """
    if isinstance(body, list):
        items = [without_status_versions(item) for item in body]
        return [b for b, _ in items], sum(n for _, n in items)
    if not isinstance(body, dict):
        return body, 0
    out: dict[str, Any] = {}
    found = 0
    is_status = "state" in body and "worker_id" in body
    for key, value in body.items():
        if is_status and key == "version" and isinstance(value, str):
            found += 1
            continue
        out[key], n = without_status_versions(value)
        found += n
    return out, found


def compare(step: Step, java: Answer, ours: Answer) -> Outcome:
    """Status codes must be equal, and the bodies' shapes (an error body is shaped like any other)."""
    diffs: list[str] = []
    if java.status != ours.status:
        diffs.append(f"status: Java {java.status}, kconnect {ours.status}")
    diffs.extend(shape_differences(shape(java.body, step.maps), shape(ours.body, step.maps)))
    if step.values is not None:
        theirs, mine = step.values(java.body), step.values(ours.body)
        if theirs != mine:
            diffs.append(f"values: Java {_brief(theirs)}, kconnect {_brief(mine)}")
    return Outcome(step, java, ours, tuple(diffs))


def audit(outcomes: Iterable[Outcome], known: Mapping[str, KnownDifference]) -> list[str]:
    """Problems with the run: differences not in ``known``, entries of ``known`` that no longer occur or
    occur with other codes, and names in ``known`` that are no step at all (so the table never goes
    stale)."""
    problems: list[str] = []
    seen: set[str] = set()
    for o in outcomes:
        seen.add(o.step.name)
        entry = known.get(o.step.name)
        if entry is None:
            if not o.same:
                problems.append(f"{o.step.name}: unexpected difference: {'; '.join(o.differences)}")
            continue
        if o.same:
            problems.append(f"{o.step.name}: listed in KNOWN_DIFFERENCES but both sides now agree")
        elif (o.java.status, o.ours.status) != (entry.java_status, entry.kconnect_status):
            problems.append(
                f"{o.step.name}: expected Java {entry.java_status} / kconnect {entry.kconnect_status}, "
                f"got Java {o.java.status} / kconnect {o.ours.status}: {'; '.join(o.differences)}"
            )
    for name in sorted(set(known) - seen):
        problems.append(f"{name}: listed in KNOWN_DIFFERENCES but no step has that name")
    return problems


def _code(answer: Answer) -> str:
    return str(answer.status) if answer.polls == 1 else f"{answer.status} ({answer.polls} polls)"


def summary(outcomes: Iterable[Outcome], known: Mapping[str, KnownDifference]) -> str:
    """A side-by-side table: step, request, Java's code, kconnect's code, and same / known / DIFF."""
    rows = [("step", "request", "java", "kconnect", "result")]
    for o in outcomes:
        verdict = "same" if o.same else ("known" if o.step.name in known else "DIFF")
        request = f"{o.step.method} {o.step.path}"
        rows.append((o.step.name, request[:58], _code(o.java), _code(o.ours), verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
