"""Kafka's ``${provider:[path:]key}`` reference grammar, shared by worker properties and connector configs.

Why a module of its own: the worker's properties file (:mod:`kconnect.config.properties`) and the
connector configs' providers (:mod:`kconnect.config.config_providers`) read the same grammar, and the
providers read properties files, so the grammar sits below both and neither imports the other back.

The grammar is that of Kafka's ``ConfigTransformer``: provider up to the first colon, an optional path up
to the next, the rest is the key (a path cannot hold a colon, a key can).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["VARIABLE", "Reference", "has_references", "references"]

#: Kafka's ConfigTransformer pattern: ``${provider:key}`` or ``${provider:path:key}``.
VARIABLE = re.compile(r"\$\{(?P<provider>[^}:]*):(?:(?P<path>[^}:]*):)?(?P<key>[^}]*)\}")


@dataclass(frozen=True)
class Reference:
    """One ``${...}`` in a value."""

    text: str
    provider: str
    path: str | None
    key: str


def references(value: str) -> list[Reference]:
    """The references in ``value``, in order."""
    return [Reference(m.group(0), m["provider"], m["path"], m["key"]) for m in VARIABLE.finditer(value)]


def has_references(value: str | None) -> bool:
    """Whether ``value`` holds a ``${provider:...}`` reference (to any provider)."""
    return value is not None and VARIABLE.search(value) is not None
