"""Java's ``String.trim``, which both config layers apply to values, names and messages.

Why here: worker properties (:mod:`kconnect.config.values`) and the connector ConfigDef
(:mod:`kconnect.runtime.plugins.config_def`) trim the way Java does; ``config/`` is the lowest layer and
imports nothing from ``runtime/``, so the one copy lives here and the plugins layer imports it.
"""

from __future__ import annotations

__all__ = ["java_trim"]


def java_trim(text: str) -> str:
    """Java's ``String.trim``: strips code points up to U+0020 only, unlike ``str.strip``.

    Why: Java trims config values, names and messages this way; ``str.strip`` also strips no-break and
    other Unicode spaces, so a value Java keeps would change. The one copy: worker
    properties (:mod:`kconnect.config.values`) and connector configs
    (:mod:`kconnect.runtime.plugins.config_def`) call it.
    """
    start, end = 0, len(text)
    while start < end and ord(text[start]) <= 0x20:
        start += 1
    while end > start and ord(text[end - 1]) <= 0x20:
        end -= 1
    return text[start:end]
