"""The REST listeners a worker serves (``listeners``, ``admin.listeners``): their URLs parsed and checked.

A module of its own because both the key table (the ``ListenerList`` validator) and the REST server
(``kconnect.rest.server``, through :class:`~kconnect.config.worker.WorkerConfig`) read listener URLs,
and both must read them the same way, as Apache Kafka Connect's REST server does.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from .values import Rejected, Validator


class RestListener(NamedTuple):
    """One REST listener: protocol ``http`` or ``https``, host (empty = every interface), port (0 = any)."""

    protocol: str
    host: str
    port: int


_LISTENER = re.compile(
    r"(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://(?:\[(?P<ipv6>[0-9A-Za-z:.%_-]*)\]|(?P<host>[0-9A-Za-z%._-]*))"
    r":(?P<port>[0-9]{1,5})/?"
)


def parse_listener(text: str) -> RestListener:
    """Parse ``protocol://host:port`` as Apache's REST server does (protocol case-insensitive).

    Raises ValueError; listeners read through :class:`WorkerConfig` have already passed this check.
    """
    match = _LISTENER.fullmatch(text)
    if match is None:
        raise ValueError(f"'{text}' is not of the form protocol://host:port")
    protocol = match["protocol"].lower()
    if protocol not in ("http", "https"):
        raise ValueError(f"'{text}' has protocol {match['protocol']}; only http and https are supported")
    port = int(match["port"])
    if port > 65535:
        raise ValueError(f"'{text}' has port {port}, above 65535")
    return RestListener(protocol, match["ipv6"] if match["ipv6"] is not None else match["host"], port)


class ListenerList(Validator):
    """``listeners`` and ``admin.listeners``: URLs :func:`parse_listener` accepts, the first bad one named."""

    def __init__(self, *, may_be_empty: bool) -> None:
        self.may_be_empty = may_be_empty
        self.allowed = (
            ("a comma-separated list" if may_be_empty else "a non-empty comma-separated list")
            + " of URLs protocol://host:port with protocol http or https"
            + " (empty host: every interface; port 0-65535)"
            + ("; an empty value disables them" if may_be_empty else "")
        )

    def __call__(self, value: Any) -> Any:
        if not value and not self.may_be_empty:
            raise Rejected()
        for entry in value:
            try:
                parse_listener(entry)
            except ValueError:
                raise Rejected(f"'{entry}' is not") from None
        return value
