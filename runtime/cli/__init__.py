"""The ``kconnect`` command line."""

from kconnect.runtime.cli.main import main

__all__ = ["main"]
