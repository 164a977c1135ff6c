"""Example kconnect connector plugins, found by the worker through the ``kconnect.plugins`` entry points.

``SequenceSourceConnector`` writes the numbers 0, 1, 2, ... to a topic and resumes after the last one
written when restarted or moved; ``JsonLinesSinkConnector`` appends each record's value to a file as
one line of JSON. Both are deliberately small: they show the contract, not a real system's client.
"""

from importlib.metadata import PackageNotFoundError, version


def plugin_version() -> str:
    """The installed distribution's version: what ``GET /connector-plugins`` reports for the plugins."""
    try:
        return version("kconnect-plugin-example")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "unknown"
