"""The old import path of :mod:`kconnect.runtime.codecs.java_json`, kept so existing imports still work.

Java's JSON spelling moved below storage (``runtime/codecs``) because the data plane and the plugins use
it too; import it from there.
"""

from __future__ import annotations

from kconnect.runtime.codecs.java_json import (
    Float32,
    JavaJsonError,
    java_double_str,
    java_float_str,
    read,
    write,
    write_record,
)

__all__ = [
    "Float32",
    "JavaJsonError",
    "java_double_str",
    "java_float_str",
    "read",
    "write",
    "write_record",
]
