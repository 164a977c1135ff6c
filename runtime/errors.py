"""Errors a worker answers REST requests with; each carries the HTTP status Apache Kafka Connect uses."""

from __future__ import annotations


class ConnectError(Exception):
    """The base of every error a REST request can end in: it carries the HTTP status, and the REST layer
    answers ``{error_code, message}`` from it as Java's ConnectExceptionMapper does. Anything else that
    escapes is a 500."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequestError(ConnectError):
    """400: the request itself is wrong (a malformed body, an invalid offset, a connector not in the state the
    operation needs), so retrying it unchanged cannot help."""

    status = 400


class NotFoundError(ConnectError):
    """404: what the request names does not exist (a connector, a task's status, a logger, a plugin), as
    Java's NotFoundException; Java also answers an unknown log level with 404."""

    status = 404


class AlreadyExistsError(ConnectError):
    """409: creating a connector whose name is taken, as Java's AlreadyExistsException; the existing config is
    left untouched."""

    status = 409


class RebalanceNeededError(ConnectError):
    """The request needs a settled group (a leader known, a config read): the client should retry."""

    status = 409


class ForbiddenError(ConnectError):
    """403: the request is refused as such, whatever its content: an internal request with a bad session-key
    signature, or a topic-tracking endpoint the worker's config disables."""

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
