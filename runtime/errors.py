"""Errors a worker answers REST requests with; each carries the HTTP status Apache Kafka Connect uses."""

from __future__ import annotations


class ConnectError(Exception):
    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequestError(ConnectError):
    status = 400


class NotFoundError(ConnectError):
    status = 404


class AlreadyExistsError(ConnectError):
    status = 409


class RebalanceNeededError(ConnectError):
    """The request needs a settled group (a leader known, a config read): the client should retry."""

    status = 409


class ForbiddenError(ConnectError):
    status = 403


class NotLeaderError(ConnectError):
    """Only the leader writes the config topic; the REST layer forwards the request to ``leader_url``."""

    status = 409

    def __init__(self, leader_url: str) -> None:
        super().__init__("Cannot complete request because worker is not leader")
        self.leader_url = leader_url


class NotAssignedError(NotLeaderError):
    """The request must run on the worker that owns a connector or task (Java's NotAssignedException):
    the REST layer forwards it to ``leader_url``, which here is the owner's URL."""

    def __init__(self, owner_url: str, what: str) -> None:
        super().__init__(owner_url)
        self.message = f"Cannot complete request because {what} is not assigned to this worker"
        self.args = (self.message,)
