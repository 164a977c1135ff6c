"""Plugin version requirements (KIP-891): ``connector.plugin.version`` and the other version keys.

Apache Kafka Connect 4.1 reads these values as Maven version ranges: ``latest`` or no value asks for the
newest installed version; a bare version (``1.2``) is a hard requirement for exactly that version, as
Connect turns Maven's "soft" requirement into ``[1.2]``; ``[1.0,2.0)``, ``(,1.5]``, ``[2.0,)`` are ranges
with inclusive ``[]`` and exclusive ``()`` ends, and several ranges separated by commas
(``[1.0,1.2),(1.2,)``) match a version any of them contains. The newest installed version the
requirement contains is chosen.

Versions are ordered as PEP 440 orders them where they parse (a Python distribution's version does),
otherwise by their dot- and dash-separated parts, numbers as numbers: close to Maven's ordering for the
versions plugins actually carry, without re-implementing Maven's qualifier rules.

Pure: no plugin is loaded here; the registry (``registry.PluginRegistry``) asks these functions which of its
versions a config selects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

__all__ = [
    "LATEST",
    "InvalidVersionSpec",
    "Restriction",
    "VersionRequirement",
    "newest",
    "not_found_message",
    "requirement",
    "version_key",
]

#: The value that asks for the newest version, as no value does.
LATEST = "latest"


class InvalidVersionSpec(ValueError):
    """A value that is no version range; the message says what is wrong, as Maven's does."""


def version_key(version: str) -> tuple[Any, ...]:
    """A sort key: PEP 440 versions by their meaning, anything else by its parts after every PEP 440
    version (numbers as numbers, so ``1.10`` comes after ``1.9``)."""
    try:
        return (0, Version(version))
    except InvalidVersion:
        parts = re.split(r"[.\-_]", version)
        return (1, tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in parts))


@dataclass(frozen=True, slots=True)
class Restriction:
    """One range: bounds (None: unbounded) and whether each is included."""

    lower: str | None
    lower_inclusive: bool
    upper: str | None
    upper_inclusive: bool

    def contains(self, version: str) -> bool:
        key = version_key(version)
        if self.lower is not None:
            low = version_key(self.lower)
            if key < low or (key == low and not self.lower_inclusive):
                return False
        if self.upper is not None:
            high = version_key(self.upper)
            if key > high or (key == high and not self.upper_inclusive):
                return False
        return True

    def __str__(self) -> str:
        # Always both bounds: Apache Kafka 4.x's messages name the range 1.2 asks for as [1.2,1.2].
        return (
            ("[" if self.lower_inclusive else "(")
            + (self.lower or "")
            + ","
            + (self.upper or "")
            + ("]" if self.upper_inclusive else ")")
        )


@dataclass(frozen=True, slots=True)
class VersionRequirement:
    """What a ``*.version`` value asks for: the versions any of its restrictions contains."""

    restrictions: tuple[Restriction, ...]

    def contains(self, version: str) -> bool:
        return any(r.contains(version) for r in self.restrictions)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.restrictions)


_RANGE = re.compile(r"\s*([\[(])([^\[\]()]*)([\])])\s*")


def _restriction(opening: str, body: str, closing: str, spec: str) -> Restriction:
    lower_inclusive, upper_inclusive = opening == "[", closing == "]"
    if "," not in body:
        single = body.strip()
        if not single or not (lower_inclusive and upper_inclusive):
            raise InvalidVersionSpec(f"Single version must be surrounded by []: {spec}")
        return Restriction(single, True, single, True)
    low_text, _, high_text = body.partition(",")
    if "," in high_text:
        raise InvalidVersionSpec(f"A range has two bounds at most: {spec}")
    low, high = low_text.strip() or None, high_text.strip() or None
    if low is not None and high is not None:
        if version_key(high) < version_key(low):
            raise InvalidVersionSpec(f"Range defies version ordering: {spec}")
        if low == high and not (lower_inclusive and upper_inclusive):
            raise InvalidVersionSpec(f"Range cannot have identical boundaries: {spec}")
    if (low is None and lower_inclusive) or (high is None and upper_inclusive):
        raise InvalidVersionSpec(f"An unbounded end is written with ( or ): {spec}")
    return Restriction(low, lower_inclusive, high, upper_inclusive)


def requirement(spec: str | None) -> VersionRequirement | None:
    """The requirement a ``*.version`` value states; None for no value or ``latest`` (the newest).

    Raises InvalidVersionSpec, naming what is wrong, for a value that is no version range.
    """
    if spec is None:
        return None
    text = spec.strip()
    if text == LATEST:
        return None
    if not text:
        raise InvalidVersionSpec("a version or a version range is required, or 'latest'")
    if text[0] not in "[(":
        if any(c in text for c in "[](),") or any(c.isspace() for c in text):
            raise InvalidVersionSpec(f"Unbounded range or stray bracket: {text}")
        return VersionRequirement((Restriction(text, True, text, True),))
    restrictions: list[Restriction] = []
    position = 0
    while position < len(text):
        found = _RANGE.match(text, position)
        if found is None:
            raise InvalidVersionSpec(f"Unbounded range: {text}")
        restrictions.append(_restriction(found.group(1), found.group(2), found.group(3), text))
        position = found.end()
        if position < len(text):
            if text[position] != ",":
                raise InvalidVersionSpec(
                    f"Only fully-qualified sets allowed in multiple set scenario: {text}"
                )
            position += 1
            if position >= len(text):
                raise InvalidVersionSpec(f"Unbounded range: {text}")
    return VersionRequirement(tuple(restrictions))


def newest(versions: Iterable[str], wanted: VersionRequirement | None) -> str | None:
    """The newest of ``versions`` that ``wanted`` contains (any when None); None if none does."""
    matching = [v for v in versions if wanted is None or wanted.contains(v)]
    return max(matching, key=version_key) if matching else None


def not_found_message(plugin: str, wanted: VersionRequirement, available: Sequence[str]) -> str:
    """Java's words for a requirement no installed version meets."""
    return (
        f"Plugin {plugin} not found that matches the version range {wanted}, available versions: "
        f"[{', '.join(available)}]"
    )
