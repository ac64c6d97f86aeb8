"""Debian's Chromium under Selenium, headless and quiet: no sync, updates or first-run screens."""

from __future__ import annotations

import shutil
from typing import Any

from support.real import unavailable

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Nothing of Chromium's own reaches the network or asks for anything while a test drives it.
QUIET = (
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
)


def chromium_options(*flags: str) -> Any:
    """Selenium's options for Debian's Chromium with QUIET and `flags`; skipped without it."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        unavailable("headless Chromium needs Debian's chromium and chromium-driver")
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*QUIET, *flags):
        options.add_argument(flag)
    return options
