"""Web apps get the broker's tokens in a real browser: the reference extension, the native
host manifest written by `signin-broker install-browser`, the example web app.

Headless Chromium (Debian's chromium and chromium-driver) with a temporary profile whose
user data folder is where install-browser writes (XDG_CONFIG_HOME/chromium), the
unpacked extension loaded with --load-extension. Firefox ESR (Debian's firefox-esr) runs
the same happy path without a WebDriver (geckodriver is in no registry here): a fresh
profile that takes an unsigned extension from its own extensions folder, and a page that
reports what it got to the test's server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from signin_broker import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from support.chromium import CHROMEDRIVER, chromium_options
from support.commands import signin_broker
from support.real import unavailable
from support.signin import signed_in_daemon
from support.tokens import PAGE_TOKEN_FIELDS, userinfo_sub

pytestmark = pytest.mark.external

ROOT = Path(__file__).parents[2]
EXTENSION = ROOT / "src" / "signin_broker" / "extension"
CHROMIUM_ID = "cebidliipbcfhdfgddngepmjegpjahaj"  # from the manifest's key
FIREFOX_ID = "reference@signin-broker.invalid"
FIREFOX = "/usr/bin/firefox-esr"
WAIT_SECONDS = 30


class Place:
    """A temporary home for the browser: its HOME, XDG_CONFIG_HOME, and the daemon's socket."""

    def __init__(self, folder: Path, socket_path: Path) -> None:
        self.home = folder / "home"
        self.config = folder / "config"
        self.home.mkdir()
        self.config.mkdir()
        self.env = {
            **os.environ,
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.config),
            "SIGNIN_BROKER_SOCKET": str(socket_path),
        }

    def install(self, browser: str, *extensions: str) -> Path:
        """`signin-broker install-browser` as the person runs it; the manifest's path."""
        flags = [arg for extension in extensions for arg in ("--extension", extension)]
        done = signin_broker(
            "install-browser", "--browser", browser, *flags, "--json", env=self.env
        )
        assert done.returncode == 0, done.stderr
        (manifest,) = json.loads(done.stdout)["manifests"]
        return Path(manifest["manifest"])


@pytest.fixture
def place(socket_path: Path) -> Iterator[Place]:
    folder = short_temp_dir()
    yield Place(folder, socket_path)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def signed_in(stub: StubProvider, socket_path: Path) -> Iterator[DaemonProcess]:
    with signed_in_daemon(stub, socket_path) as daemon:
        yield daemon


@pytest.fixture
def web_apps(stub: StubProvider) -> Iterator[tuple[str, str]]:
    """The example web app twice: on an origin the policy will allow, and on another."""
    started = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "web_app.py"), stub.issuer, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        urls = [process.stdout.readline().strip() for process in started]  # type: ignore[union-attr]
        assert all(url.startswith("http://127.0.0.1:") for url in urls), urls
        yield urls[0], urls[1]
    finally:
        for process in started:
            process.kill()
            process.wait()


def allow(socket_path: Path, app: str, origin: str) -> None:
    allowed = signin_broker("--socket", str(socket_path), "apps", "allow", app, "--origin", origin)
    assert allowed.returncode == 0, allowed.stderr


# -- Chromium ----------------------------------------------------------------------------


@pytest.fixture
def chromium(place: Place) -> Iterator[Any]:
    options = chromium_options(
        "--headless=new",  # the old headless mode loads no extension
        # Where Chromium reads NativeMessagingHosts: its user data folder, here the one it
        # takes by default under XDG_CONFIG_HOME, as install-browser writes.
        f"--user-data-dir={place.config / 'chromium'}",
        f"--load-extension={EXTENSION}",
        f"--disable-extensions-except={EXTENSION}",
    )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    def start() -> Any:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER, env=place.env), options=options)
        driver.set_page_load_timeout(WAIT_SECONDS)
        driver.set_script_timeout(WAIT_SECONDS)
        started.append(driver)
        return driver

    started: list[Any] = []
    try:
        yield start
    finally:
        for driver in started:
            driver.quit()


def page_outcome(driver: Any, url: str) -> dict[str, str]:
    """Open the example page, which asks for a token at once; what it shows once it has done."""
    from selenium.webdriver.support.wait import WebDriverWait

    driver.get(url + "/?now")
    script = """
        const token = document.getElementById("token-status").dataset;
        const api = document.getElementById("api-result").dataset;
        if (!token.state || (token.state === "ok" && !api.state)) return null;
        return {token: token.state, code: token.code || "", api: api.state || "",
                sub: api.sub || "", said: document.getElementById("token-status").textContent};
    """
    return WebDriverWait(driver, WAIT_SECONDS).until(lambda d: d.execute_script(script))  # type: ignore[no-any-return]


def test_a_page_on_an_allowed_origin_gets_a_token_in_chromium_and_another_origin_does_not(
    chromium: Any,
    place: Place,
    signed_in: DaemonProcess,
    stub: StubProvider,
    web_apps: tuple[str, str],
) -> None:
    allowed, other = web_apps
    app = f"browser:chromium/{CHROMIUM_ID}"
    manifest = place.install("chromium")
    assert (
        manifest
        == place.config / "chromium" / "NativeMessagingHosts" / "org.signin_broker.native_host.json"
    )
    allow(signed_in.socket_path, app, allowed)
    driver = chromium()

    shown = page_outcome(driver, allowed)
    assert shown["token"] == "ok" and shown["api"] == "ok", shown  # the API asked userinfo
    assert shown["sub"] == "1001"
    token = driver.execute_async_script(
        "const done = arguments[0];"
        " window.signinBroker.getToken({scopes: ['openid']})"
        ".then(done, (e) => done({error: e.code}))"
    )
    assert set(token) == PAGE_TOKEN_FIELDS
    assert userinfo_sub(stub.issuer, token["accessToken"]) == "1001"

    refused = page_outcome(driver, other)
    assert refused["token"] == "refused" and refused["code"] == "permission_denied", refused
    assert f"may not get tokens for {other}" in refused["said"]

    with BrokerClient(signed_in.socket_path) as client:
        rows = [row for row in client.audit_events(app=app) if row.action == "issue_token"]
    assert rows and {json.loads(row.payload_json)["web_origin"] for row in rows} == {allowed}
    assert all(row.actor_app == app for row in rows)


def test_an_extension_not_in_the_manifest_cannot_reach_the_host(
    chromium: Any, place: Place, signed_in: DaemonProcess, web_apps: tuple[str, str]
) -> None:
    allowed, _ = web_apps
    other_extension = "abcdefghijklmnopabcdefghijklmnop"
    manifest = place.install("chromium", other_extension)  # the loaded extension is not listed
    assert json.loads(manifest.read_text())["allowed_origins"] == [
        f"chrome-extension://{other_extension}/"
    ]
    allow(signed_in.socket_path, f"browser:chromium/{CHROMIUM_ID}", allowed)
    driver = chromium()

    shown = page_outcome(driver, allowed)
    assert shown["token"] == "refused" and shown["code"] == "unavailable", shown
    assert "forbidden" in shown["said"]  # Chromium's own refusal, before any host starts
    with BrokerClient(signed_in.socket_path) as client:
        assert not client.audit_events(app=f"browser:chromium/{CHROMIUM_ID}")
        assert not [
            app for app in client.apps().apps if app.id.startswith("browser:") and app.last_pid
        ]


# -- Firefox ESR ---------------------------------------------------------------------------

FIREFOX_PREFERENCES = {
    "xpinstall.signatures.required": False,  # ESR takes an unsigned extension with this
    "extensions.autoDisableScopes": 0,  # an extension put in the profile starts enabled
    "extensions.enabledScopes": 15,
    "extensions.originControls.grantByDefault": True,  # its content scripts' hosts too
    "browser.shell.checkDefaultBrowser": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "app.update.enabled": False,
    "extensions.update.enabled": False,
    "network.captive-portal-service.enabled": False,
}
REPORTING_PAGE = b"""<!doctype html><html><body><script>
const report = (what) => fetch("/report", {method: "POST", body: JSON.stringify(what)});
window.addEventListener("load", () => {
  if (!window.signinBroker) { report({missing: true}); return; }
  window.signinBroker.getToken({scopes: ["openid"]})
    .then((token) => report({token}), (error) => report({code: error.code, said: error.message}));
});
</script></body></html>"""


class Reports(BaseHTTPRequestHandler):
    """The page Firefox opens, and where it posts what it got (no WebDriver here)."""

    received: list[dict[str, Any]]

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(REPORTING_PAGE)))
        self.end_headers()
        self.wfile.write(REPORTING_PAGE)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def reporting_page() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    handler = type("PageReports", (Reports,), {"received": received})
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}", received
        server.shutdown()


def firefox_profile(folder: Path) -> Path:
    """A fresh profile holding the reference extension (as an .xpi named by its id)."""
    profile = folder / "firefox-profile"
    (profile / "extensions").mkdir(parents=True)
    lines = [
        f"user_pref({json.dumps(k)}, {json.dumps(v)});" for k, v in FIREFOX_PREFERENCES.items()
    ]
    (profile / "user.js").write_text("\n".join(lines) + "\n")
    with zipfile.ZipFile(profile / "extensions" / f"{FIREFOX_ID}.xpi", "w") as xpi:
        for file in sorted(EXTENSION.iterdir()):
            xpi.write(file, file.name)
    return profile


def test_a_page_on_an_allowed_origin_gets_a_token_in_firefox_esr(
    place: Place,
    signed_in: DaemonProcess,
    stub: StubProvider,
    reporting_page: tuple[str, list[dict[str, Any]]],
) -> None:
    if not shutil.which(FIREFOX):
        unavailable("Firefox needs Debian's firefox-esr")
    url, received = reporting_page
    app = f"browser:firefox/{FIREFOX_ID}"
    manifest = place.install("firefox")
    assert (
        manifest
        == place.home / ".mozilla" / "native-messaging-hosts" / "org.signin_broker.native_host.json"
    )
    allow(signed_in.socket_path, app, url)
    firefox = subprocess.Popen(
        [FIREFOX, "--headless", "--no-remote", "--profile", str(firefox_profile(place.home)), url],
        env=place.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60  # a first start of a new profile takes a while
        while not received and time.monotonic() < deadline and firefox.poll() is None:
            time.sleep(0.2)
    finally:
        os.killpg(firefox.pid, 9)
        firefox.wait()
    assert received, "Firefox's page reported nothing within 60 s"
    (report,) = received
    assert "token" in report, report
    assert userinfo_sub(stub.issuer, report["token"]["accessToken"]) == "1001"
    with BrokerClient(signed_in.socket_path) as client:
        rows = [row for row in client.audit_events(app=app) if row.action == "issue_token"]
    assert rows and {json.loads(row.payload_json)["web_origin"] for row in rows} == {url}
