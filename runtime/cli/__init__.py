"""The ``kconnect`` command line (``main``), its REST client, ``group describe`` and the embedded broker.

``main`` is not imported here: ``python -m kconnect.runtime.cli.main`` would then find it already loaded.
"""
