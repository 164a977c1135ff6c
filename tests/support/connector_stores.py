"""What ``runtime.shell.connectors.Connectors`` reads and writes of the internal topics, for unit tests: the
status topic as a real fold (what a put writes is what Java's putSafe guard reads next) and a config
snapshot holding every connector."""

from __future__ import annotations

from typing import Any

from kconnect.runtime.storage import status_log


class FoldedStores:
    def __init__(self) -> None:
        self.fold = status_log.StatusFold()
        self.written: list[Any] = []

    def put_status(self, status: Any) -> None:
        self.written.append(status)
        self.fold.add(status)

    def status_state(self) -> status_log.StatusState:
        return self.fold.freeze()

    def snapshot(self) -> Any:
        return type("Snapshot", (), {"contains": staticmethod(lambda name: True)})()
