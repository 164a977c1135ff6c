"""A real headless Chromium (Debian's, ``make chromium``) driven through its chromedriver with Selenium,
for the console's tests: no browser or driver is downloaded, and each browser gets a fresh profile."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)


def missing() -> str | None:
    """Why no browser can start here (run ``make chromium``), or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is not installed: run `make chromium`"
    return None


@contextlib.contextmanager
def chromium(
    *, width: int = 1400, height: int = 900, basic_auth: tuple[str, str] | None = None
) -> Iterator[Any]:
    """A Selenium WebDriver on a headless Chromium with a fresh ``--user-data-dir``; ``basic_auth`` makes
    the browser send those credentials with every request, as it does once a user has typed them."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = Path(tempfile.mkdtemp(prefix="kconnect-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        if basic_auth is not None:
            token = base64.b64encode(f"{basic_auth[0]}:{basic_auth[1]}".encode()).decode()
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd(
                "Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}}
            )
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def click(driver: Any, by: str, value: str, tries: int = 20) -> None:
    """Find an element and click it, finding it again when the page re-rendered it in between.

    The console re-renders its views on a timer (it polls the REST API), so an element found a moment
    ago may be gone by the click: Selenium then raises a stale-element error and no click happened, so
    trying again is safe."""
    import time

    from selenium.common.exceptions import StaleElementReferenceException

    for attempt in range(tries):
        try:
            driver.find_element(by, value).click()
            return
        except StaleElementReferenceException:
            if attempt == tries - 1:
                raise
            time.sleep(0.1)
