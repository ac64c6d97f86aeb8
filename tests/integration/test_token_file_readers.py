"""Programs that only read a token from a file, on the broker's files: Prometheus, curl, systemd.

Each runs as docs/how-to/token-files.md tells a person to: the page's own blocks, with
only the paths and the target changed for this machine (and, for Prometheus, a scrape
four times a second). The target is an endpoint of the test's own that asks the
stub's userinfo about every token it is sent, as a resource server trusting the
provider would. Over three token lifetimes, with the daemon renewing and rewriting the
files under the readers, every request of Prometheus (Debian's package) and of curl
(`-H @file`) is authorised. The LoadCredential= unit is checked by systemd-analyze and
names the file the broker writes.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from signin_broker_testing import StubProvider
from support.docs_blocks import blocks, replaced
from support.loopback_http import LoopbackServer, ProviderUserinfo, QuietHandler, honoured
from support.real import unavailable
from support.signin import signed_in_daemon
from support.waiting import eventually

pytestmark = pytest.mark.external  # Debian's prometheus, curl, systemd-analyze

PAGE = "how-to/token-files.md"
TTL = 4  # the file is rewritten a second before expiry: under a loaded machine, not less
LIFETIMES = 3
SCRAPE = "global:\n  scrape_interval: 250ms\n  scrape_timeout: 250ms\n"
DOCS_FOLDER = "/run/user/1000/signin-broker/tokens"


class Target(LoopbackServer):
    """A metrics endpoint that answers only tokens the provider honours; each request noted."""

    def __init__(self, stub: StubProvider) -> None:
        self.judge = ProviderUserinfo(stub.base_url + stub.paths.userinfo)
        self.seen: list[tuple[float, str, str, bool]] = []  # when, who, token, honoured
        super().__init__(self._handler())

    def by(self, who: str) -> list[tuple[float, str, str, bool]]:
        return [seen for seen in list(self.seen) if seen[1] == who]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        target = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                scheme, _, token = self.headers.get("Authorization", "").partition(" ")
                good = scheme == "Bearer" and honoured(target.judge, token)
                who = self.headers.get("User-Agent", "").split("/")[0]
                target.seen.append((time.monotonic(), who, token, good))
                body = b"# TYPE reachable gauge\nreachable 1\n" if good else b"refused\n"
                self.send_response(200 if good else 401)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def test_prometheus_and_curl_are_authorised_at_every_request_over_three_lifetimes(
    folder: Path,
) -> None:
    prometheus, curl = shutil.which("prometheus"), shutil.which("curl")
    if prometheus is None or curl is None:
        unavailable("Debian's prometheus and curl are needed (apt-get install prometheus curl)")
    tokens = str(folder / "tokens")
    toml = blocks(PAGE, "## Prometheus", "toml")[0] + "\n" + blocks(PAGE, "## curl", "toml")[0]
    (folder / "config.toml").write_text(replaced(toml, {DOCS_FOLDER: tokens}))
    with StubProvider(access_token_ttl=TTL) as stub, Target(stub) as target:
        scrape = replaced(
            blocks(PAGE, "## Prometheus", "yaml")[0],
            {DOCS_FOLDER: tokens, "api.example.com:9100": target.origin.removeprefix("http://")},
        )
        (folder / "prometheus.yml").write_text(SCRAPE + scrape)
        server = subprocess.Popen(  # its first scrape comes some 5 s after its start
            [prometheus, f"--config.file={folder / 'prometheus.yml'}",
             f"--storage.tsdb.path={folder / 'tsdb'}", "--web.listen-address=127.0.0.1:0"],
            stdout=subprocess.DEVNULL, stderr=(folder / "prometheus.log").open("w"),
        )  # fmt: skip
        try:
            daemon = signed_in_daemon(
                stub, folder / "run" / "broker.sock", "--config", str(folder / "config.toml")
            )
            curled = curl_over_lifetimes(curl, folder / "tokens" / "api.header", target)
            scraped = eventually(
                lambda: spanning(target.by("Prometheus")), "three lifetimes of scrapes", timeout=30
            )
            daemon.stop()
        finally:
            server.terminate()
            server.wait(15)
    for reader, requests in (("curl", curled), ("Prometheus", scraped)):
        refused = [round(when - requests[0][0], 2) for when, _, _, good in requests if not good]
        assert refused == [], f"{reader} refused at {refused} s of {len(requests)} requests"
        assert len({token for _, _, token, _ in requests}) >= LIFETIMES, reader  # turned over
    assert len(scraped) >= 2 * LIFETIMES * TTL  # a scrape every 250 ms, give or take


def curl_over_lifetimes(curl: str, header_file: Path, target: Target) -> list[tuple]:
    """`curl -H @file` as the page runs it, ten times a second over LIFETIMES lifetimes."""
    started = time.monotonic()
    while time.monotonic() - started < LIFETIMES * TTL:  # bounded: three lifetimes
        done = subprocess.run(
            [curl, "-sS", "-o", "/dev/null", "-H", f"@{header_file}", target.origin + "/v1/me"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        time.sleep(0.1)
    return target.by("curl")


def spanning(scrapes: list[tuple]) -> list[tuple] | None:
    """The scrapes, once they span LIFETIMES token lifetimes; None before."""
    return scrapes if scrapes and scrapes[-1][0] - scrapes[0][0] >= LIFETIMES * TTL else None


def test_the_load_credential_unit_verifies_and_loads_the_file_the_broker_writes(
    tmp_path: Path,
) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable("systemd-analyze is needed (Debian package systemd)")
    (toml,) = blocks(PAGE, "## A systemd service: LoadCredential=", "toml")
    (unit,) = blocks(PAGE, "## A systemd service: LoadCredential=", "ini")
    path = next(line.split('"')[1] for line in toml.splitlines() if line.startswith("path"))
    credential = next(line for line in unit.splitlines() if line.startswith("LoadCredential="))
    assert credential == f"LoadCredential=token:{path}"
    (tmp_path / "backup-upload.service").write_text(unit)
    verified = subprocess.run(
        [analyze, "verify", "--man=no", str(tmp_path / "backup-upload.service")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    problems = [line for line in verified.stderr.splitlines() if "backup-upload" in line]
    assert verified.returncode == 0 and problems == [], verified.stderr
