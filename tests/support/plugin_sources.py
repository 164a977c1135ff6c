"""Source text of small connector plugins that tests write into a ``plugin.path`` directory.

Why text: a plugin under test must be imported by the worker (and, for tasks run as Spark jobs, by an
executor's Python worker) from ``plugin.path``, as a user's would be, not from the test's own modules.
"""

from __future__ import annotations

from typing import Literal


def one_task_connector(kind: Literal["Source", "Sink"], task_class: str, connector_class: str) -> str:
    """A connector class (appended to a plugin module that defines ``task_class``) with one task, which
    gets the connector's whole config."""
    return f"""

from kconnect.runtime.plugins.api import {kind}Connector as _{kind}Connector
from kconnect.runtime.plugins.config_def import ConfigDef as _ConfigDef


class {connector_class}(_{kind}Connector):
    def version(self):
        return "1.0"

    def config_def(self):
        return _ConfigDef()

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return {task_class}

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass
"""
