"""Reading a REST request's JSON body: every malformed body is the client's mistake, a 400, never a 500.

One parser for every route that takes JSON (connectors, tasks, static assignments, validation, loggers),
because each of the ways a body can be wrong once escaped as a 500 somewhere: bytes that are not UTF-8, a
``\\ud800`` escape (valid JSON, no Unicode text: it failed wherever the body was next encoded), and
nesting deep enough to exhaust Python's recursion limit (a 200,000-deep array raised RecursionError out of
``json.loads``). Bodies are bounded in depth as well as in size (``limits.MAX_BODY_BYTES``): Jackson, which
Apache Kafka Connect parses with, refuses nesting past 1,000 levels, and kconnect refuses it sooner
(``MAX_JSON_DEPTH``), so that no later step that walks the value recursively (encoding it for the config
topic, an error message naming it) can run out of stack either.
"""

from __future__ import annotations

import json
from typing import Any

from kconnect.runtime.errors import BadRequestError

__all__ = ["MAX_JSON_DEPTH", "json_depth", "parse_json"]

#: The deepest nesting a body may have. Connector configs are flat and offsets two or three levels deep;
#: this leaves room for any plausible body while staying far below Python's recursion limit.
MAX_JSON_DEPTH = 100


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests arrays and objects (a scalar is 0), walked without recursion so that the
    walk itself cannot hit the recursion limit it guards against."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children if isinstance(child, dict | list))
    return deepest


def parse_json(raw: bytes, what: str = "Request body") -> Any:
    """The JSON document in ``raw``; raises BadRequestError (400) naming what is wrong with it."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise BadRequestError(f"{what} nests more than {MAX_JSON_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise BadRequestError(f"{what} is not valid JSON: {exc}") from exc
    if json_depth(body) > MAX_JSON_DEPTH:
        raise BadRequestError(f"{what} nests more than {MAX_JSON_DEPTH} levels deep")
    try:
        # A lone surrogate escape is valid JSON but no Unicode text: refused here, not a 500 later.
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except ValueError as exc:
        raise BadRequestError(f"{what} is not valid JSON: {exc}") from exc
    return body
