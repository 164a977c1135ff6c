"""A plugin module that fails on import, as one with a missing dependency or a bug at import time would."""

raise RuntimeError("kconnect-plugin-broken fails on import on purpose")
