"""``kconnect apply``'s pure core: desired connectors read from file text, and the plan that brings a
cluster's connectors to them.

Why a module of its own: what ``apply`` would do (create, update, leave alone, delete) is a decision
over two maps, the desired configs and the stored ones, and it must be the same decision for
``--dry-run`` and for the real run, testable with tables and no worker. The shell
(:mod:`kconnect.runtime.cli.apply`) reads the files, asks the REST API, and carries the plan out.

Configs are compared as the config topic stores them: unresolved, so a ``${provider:path:key}``
reference is compared (and sent) as written, never as the secret it resolves to. A stored config
carries the connector's ``name``; the name is the connector's identity here, so it is left out of the
comparison.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kconnect.config.masking import HIDDEN, is_sensitive
from kconnect.config.properties import PropertiesSyntaxError, parse_properties

__all__ = [
    "EXIT_CHANGED",
    "EXIT_FAILED",
    "EXIT_UNCHANGED",
    "SUFFIXES",
    "Change",
    "Desired",
    "Kind",
    "Plan",
    "SpecError",
    "Step",
    "collect",
    "parse_connectors",
    "plan",
    "render_plan",
]

#: Exit statuses of ``kconnect apply`` (2 stays the command line's, as for every ``kconnect`` command).
EXIT_UNCHANGED = 0  # every connector already as desired (with --dry-run: nothing would change)
EXIT_FAILED = 1  # a file, a validation or a REST call failed; see stderr for which
EXIT_CHANGED = 3  # something was created, updated or deleted (with --dry-run: would be)

#: File name endings ``apply`` reads in a directory; any other file there is skipped.
SUFFIXES = (".json", ".yaml", ".yml", ".properties")


class SpecError(Exception):
    """A desired-connector file that cannot be used: it names the file and what is wrong."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem


@dataclass(frozen=True)
class Desired:
    """One connector as a file wants it: its name, its flat string config, and the file it came from."""

    name: str
    config: Mapping[str, str]
    source: str


class Kind(StrEnum):
    """What the plan does with one connector."""

    CREATE = "create"
    UPDATE = "update"
    UNCHANGED = "unchanged"
    DELETE = "delete"
    #: On the cluster, named by no file, and --prune not given: kept, and said so.
    UNMANAGED = "unmanaged"


@dataclass(frozen=True)
class Change:
    """One key's difference; ``old`` None: added, ``new`` None: removed."""

    key: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class Step:
    """One connector's part of the plan; ``config`` is what is sent (create, update)."""

    kind: Kind
    name: str
    changes: tuple[Change, ...] = ()
    config: Mapping[str, str] = field(default_factory=dict)
    source: str = ""


@dataclass(frozen=True)
class Plan:
    """Every connector's step, in a stable order: by name, the desired ones first."""

    steps: tuple[Step, ...]

    def of(self, *kinds: Kind) -> list[Step]:
        """The steps of the given kinds, in plan order."""
        return [s for s in self.steps if s.kind in kinds]

    @property
    def changes_anything(self) -> bool:
        """Whether carrying the plan out writes anything."""
        return bool(self.of(Kind.CREATE, Kind.UPDATE, Kind.DELETE))


# ============================================================================================ input


def _string(source: str, key: str, value: Any) -> str:
    """A config value as Connect stores it: strings as written, YAML's and JSON's scalars as Java would
    print them (``true``, ``5``), a list of scalars comma-separated (Connect's LIST type)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ",".join(_string(source, key, v) for v in value)
    what = "null" if value is None else type(value).__name__
    raise SpecError(source, f"the value of {key!r} is {what}; a connector config value must be a string")


def _from_document(source: str, doc: Any) -> Desired:
    """One connector from a decoded JSON or YAML document: Connect's ``{"name", "config"}`` or a flat
    config that holds ``name`` (as ``connect-standalone`` takes)."""
    if not isinstance(doc, dict):
        raise SpecError(
            source, "a connector must be an object ({'name': ..., 'config': {...}} or a flat config)"
        )
    if "config" in doc:
        config = doc["config"]
        if not isinstance(config, dict):
            raise SpecError(source, "'config' must be an object of string values")
        extra = sorted(set(doc) - {"name", "config"})
        if extra:
            raise SpecError(source, f"unexpected fields beside 'name' and 'config': {', '.join(extra)}")
        name = doc.get("name", config.get("name"))
    else:
        config, name = doc, doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError(source, "names no connector: add a 'name'")
    flat = {str(k): _string(source, str(k), v) for k, v in config.items()}
    if flat.get("name", name) != name:
        raise SpecError(source, f"'name' is {name!r} but config's 'name' is {flat['name']!r}")
    if not flat.get("connector.class"):
        raise SpecError(source, f"connector {name!r} has no 'connector.class'")
    flat["name"] = name
    return Desired(name, flat, source)


def parse_connectors(source: str, text: str) -> list[Desired]:
    """The connectors one file describes, by its name's ending: ``.json`` (one connector, or an array of
    them), ``.yaml``/``.yml`` (one per document, or a list), ``.properties`` (one flat config).

    Raises SpecError naming ``source`` and the problem (syntax, no name, a non-string value).
    """
    lowered = source.lower()
    if lowered.endswith(".properties"):
        try:
            return [_from_document(source, parse_properties(text))]
        except PropertiesSyntaxError as exc:
            raise SpecError(source, f"not a valid properties file: {exc}") from None
    if lowered.endswith(".json"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(source, f"not valid JSON: {exc}") from None
        docs: list[Any] = doc if isinstance(doc, list) else [doc]
    elif lowered.endswith((".yaml", ".yml")):
        import yaml

        try:
            loaded = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            raise SpecError(source, f"not valid YAML: {' '.join(str(exc).split())}") from None
        docs = [item for d in loaded for item in (d if isinstance(d, list) else [d])]
    else:
        raise SpecError(source, f"unknown file type; apply reads {', '.join(SUFFIXES)}")
    if not docs:
        raise SpecError(source, "describes no connector")
    return [_from_document(source, d) for d in docs]


def collect(files: Iterable[Desired]) -> dict[str, Desired]:
    """Desired connectors by name; a name that two files (or two documents) claim is an error, since
    which one wins would depend on the order the files are read in."""
    out: dict[str, Desired] = {}
    for desired in files:
        if desired.name in out:
            first = out[desired.name].source
            raise SpecError(desired.source, f"connector {desired.name!r} is also described in {first}")
        out[desired.name] = desired
    return out


# ============================================================================================= plan


def _changes(current: Mapping[str, str | None], desired: Mapping[str, str]) -> tuple[Change, ...]:
    keys = sorted((set(current) | set(desired)) - {"name"})
    return tuple(Change(k, current.get(k), desired.get(k)) for k in keys if current.get(k) != desired.get(k))


def plan(
    desired: Mapping[str, Desired], current: Mapping[str, Mapping[str, str | None]], *, prune: bool
) -> Plan:
    """What brings ``current`` (stored configs by connector name) to ``desired``.

    A desired connector missing from the cluster is created; one whose stored config differs in any key
    but ``name`` is updated with the whole desired config (a PUT replaces, so a key removed from the file
    is removed from the connector); an equal one is left alone. A connector on the cluster that no file
    names is deleted with ``prune``, else reported as unmanaged and kept.
    """
    steps: list[Step] = []
    for name in sorted(desired):
        want = desired[name]
        if name not in current:
            added = tuple(Change(k, None, v) for k, v in sorted(want.config.items()) if k != "name")
            steps.append(Step(Kind.CREATE, name, added, want.config, want.source))
            continue
        changes = _changes(current[name], want.config)
        kind = Kind.UPDATE if changes else Kind.UNCHANGED
        steps.append(Step(kind, name, changes, want.config, want.source))
    for name in sorted(set(current) - set(desired)):
        steps.append(Step(Kind.DELETE if prune else Kind.UNMANAGED, name))
    return Plan(tuple(steps))


# =========================================================================================== output


def _shown(key: str, value: str) -> str:
    """A value as the diff prints it: a credential's literal value hidden, a ``${...}`` reference (which
    holds no secret) shown as written, so a reviewer sees which reference changed."""
    if is_sensitive(key) and not (value.startswith("${") and value.endswith("}")):
        return HIDDEN
    return value


def _change_line(change: Change) -> str:
    if change.old is None and change.new is not None:
        return f"    + {change.key} = {_shown(change.key, change.new)}"
    if change.new is None and change.old is not None:
        return f"    - {change.key} = {_shown(change.key, change.old)}"
    old = _shown(change.key, change.old or "")
    new = _shown(change.key, change.new or "")
    return f"    ~ {change.key}: {old} -> {new}"


_MARK = {Kind.CREATE: "+", Kind.UPDATE: "~", Kind.UNCHANGED: "=", Kind.DELETE: "-", Kind.UNMANAGED: "?"}
_DONE = {Kind.CREATE: "created", Kind.UPDATE: "updated", Kind.DELETE: "deleted", Kind.UNCHANGED: "unchanged"}
_WOULD = {
    Kind.CREATE: "to create",
    Kind.UPDATE: "to update",
    Kind.DELETE: "to delete",
    Kind.UNCHANGED: "unchanged",
}


def render_step(step: Step) -> list[str]:
    """One connector's lines: a header with the mark and kind, then one line per changed key."""
    where = f" ({step.source})" if step.source else ""
    if step.kind is Kind.UNMANAGED:
        return [f"? {step.name}: named by no file; kept (--prune deletes it)"]
    lines = [f"{_MARK[step.kind]} {step.name}: {step.kind.value}{where}"]
    if step.kind in (Kind.CREATE, Kind.UPDATE):
        lines += [_change_line(c) for c in step.changes]
    return lines


def render_plan(the_plan: Plan, *, dry_run: bool, failed: Sequence[str] = ()) -> str:
    """The plan as ``apply`` prints it: each connector's lines, then a summary (what was done, or with
    ``dry_run`` what would be); ``failed`` names connectors whose REST call failed, left out of the
    counts."""
    lines = [line for step in the_plan.steps for line in render_step(step)]
    words = _WOULD if dry_run else _DONE
    counts = []
    for kind in (Kind.CREATE, Kind.UPDATE, Kind.UNCHANGED, Kind.DELETE):
        n = sum(1 for s in the_plan.of(kind) if s.name not in failed)
        counts.append(f"{n} {words[kind]}")
    unmanaged = len(the_plan.of(Kind.UNMANAGED))
    if unmanaged:
        counts.append(f"{unmanaged} unmanaged")
    if failed:
        counts.append(f"{len(failed)} failed")
    prefix = "dry run, nothing changed: " if dry_run else ""
    lines.append(f"apply: {prefix}{', '.join(counts)}")
    return "\n".join(lines)
