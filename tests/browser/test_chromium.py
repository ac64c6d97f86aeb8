"""The whole sign-in once in a real browser: headless Chromium through landing, sign-in,
dashboard and sign-out (Debian's chromium and chromium-driver; CI installs them)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.chromium import CHROMEDRIVER, chromium_options


@pytest.fixture
def chromium() -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="sb-chromium-")
    options = chromium_options("--headless", f"--user-data-dir={profile}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_landing_sign_in_dashboard_sign_out_in_headless_chromium(
    chromium: Any, stub: StubProvider, broker: DaemonProcess
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as arrived
    from selenium.webdriver.support.wait import WebDriverWait

    driver = chromium
    wait = WebDriverWait(driver, 15)
    driver.get(broker.web_url + "/")
    assert "Sign in once, for every app" in driver.page_source
    driver.find_element(By.CSS_SELECTOR, "[data-cta=sign-in]").click()
    # The stub approves the test user; the browser comes back signed in.
    wait.until(arrived.url_to_be(broker.web_url + "/dashboard"))
    assert "Signed in as Alice Example" in driver.page_source
    cookie = driver.get_cookie("signin_broker_session")
    assert cookie and cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
    driver.get(broker.web_url + "/")
    wait.until(arrived.url_to_be(broker.web_url + "/dashboard"))
    driver.find_element(By.CSS_SELECTOR, "form[action='/logout'] button").click()
    # Signed out here and at the provider, which sends the browser back to the landing.
    wait.until(arrived.url_to_be(broker.web_url + "/"))
    assert 'data-cta="sign-in"' in driver.page_source
    assert driver.get_cookie("signin_broker_session") is None
    assert any(r.path == "/logout" for r in stub.requests)
    assert len([r for r in stub.requests if r.path == "/oauth/v2/authorize"]) == 1
