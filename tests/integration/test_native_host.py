"""The native messaging host against a real daemon and the stub provider.

The browser here is a stand-in: this test's own Python interpreter, which the daemon is
told is a browser (the `browsers` setting), starts the host exactly as a browser does
(its program, the extension as the argument, frames on stdin). Where nothing is told,
the same start is a process running the host by itself: refused. Headless Chromium and
Firefox run the whole path in tests/browser/test_browser_extension.py.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.commands import BIN, signin_broker
from support.native_messaging import EXTENSION, ORIGIN, answers, frame, get_token
from support.signin import signed_in_daemon
from support.tokens import PAGE_TOKEN_FIELDS, userinfo_sub

APP = f"browser:stand-in/{EXTENSION}"
HOST = BIN / "signin-broker-native-host"
THIS_PYTHON = os.readlink("/proc/self/exe")  # what the kernel names as a child's parent


def run_host(
    socket_path: Path,
    stdin: bytes,
    *,
    program: list[str] | None = None,
    passed: tuple[str, ...] = (f"chrome-extension://{EXTENSION}/",),
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*(program or [str(HOST)]), *passed],
        input=stdin,
        capture_output=True,
        timeout=60,
        env={**os.environ, "SIGNIN_BROKER_SOCKET": str(socket_path)},
    )


@pytest.fixture
def browser_daemon(stub: StubProvider, socket_path: Path) -> Iterator[DaemonProcess]:
    """Signed in, told that this test's Python is a browser, the extension allowed for ORIGIN."""
    daemon = signed_in_daemon(stub, socket_path, "--browsers", f"stand-in={THIS_PYTHON}")
    with daemon:
        allowed = signin_broker(
            "--socket", str(socket_path), "apps", "allow", APP, "--origin", ORIGIN, "--scope",
            "openid", "--scope", "profile",
        )  # fmt: skip
        assert allowed.returncode == 0, allowed.stderr
        yield daemon


def test_an_extension_gets_a_token_for_its_origin_only_and_the_audit_names_both(
    browser_daemon: DaemonProcess, stub: StubProvider
) -> None:
    stdin = (
        get_token(ident=1, scopes=["openid"])
        + get_token("https://elsewhere.example", ident=2)
        + get_token(ident=3, idToken=True)
        + frame({"id": 4, "kind": "signDpopProof", "origin": ORIGIN,
                 "request": {"method": "GET", "url": stub.issuer + "/userinfo"}})
    )  # fmt: skip
    host = run_host(browser_daemon.socket_path, stdin)
    assert host.returncode == 0, host.stderr
    by_id = {answer["id"]: answer for answer in answers(host.stdout)}
    token = by_id[1]["token"]
    assert by_id[1]["ok"] is True and isinstance(token, dict)
    assert set(token) == PAGE_TOKEN_FIELDS
    assert userinfo_sub(stub.issuer, token["accessToken"]) == "1001"
    assert by_id[2]["ok"] is False and by_id[2]["code"] == "permission_denied"
    assert "may not get tokens for https://elsewhere.example" in str(by_id[2]["error"])
    assert by_id[3]["ok"] is False and by_id[3]["code"] == "permission_denied"  # no ID token
    assert by_id[4]["ok"] is True and by_id[4]["token"]["tokenType"] == "Bearer"  # type: ignore[index]
    assert b"refresh" not in host.stdout.lower()

    with BrokerClient(browser_daemon.socket_path) as client:
        rows = client.audit_events(app=APP)
        apps = {app.id: app for app in client.apps().apps}
    issued = [json.loads(row.payload_json) for row in rows if row.action == "issue_token"]
    assert issued and all(payload["web_origin"] == ORIGIN for payload in issued)
    assert apps[APP].origins == (ORIGIN,) and apps[APP].tokens_issued >= 1


def test_a_host_not_started_by_a_browser_is_refused_and_the_log_says_why(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    with signed_in_daemon(stub, socket_path) as daemon:  # this Python is no browser here
        chromium_app = APP.replace("stand-in", "chromium")
        signin_broker(
            "--socket", str(socket_path), "apps", "allow", chromium_app, "--origin", ORIGIN
        )
        for program in ([str(HOST)], [str(BIN / "signin-broker"), "native-host"]):
            host = run_host(socket_path, get_token(), program=program)
            (answer,) = answers(host.stdout)
            assert answer["ok"] is False and answer["code"] == "permission_denied", answer
            assert "not started by a browser the daemon knows" in str(answer["error"])
            assert f"parent is {THIS_PYTHON}" in str(answer["error"])
        (record,) = daemon.expect_log(
            msg="refused a caller that claims to be the native host of a browser extension"
        )[:1]
        assert f"parent is {THIS_PYTHON}" in record["reason"]
        with BrokerClient(socket_path) as client:
            assert not [
                app for app in client.apps().apps if app.id.startswith("browser:") and app.last_pid
            ]


def test_a_host_program_elsewhere_is_not_the_brokers_own(
    browser_daemon: DaemonProcess, folder: Path
) -> None:
    copy = folder / "signin-broker-native-host"
    shutil.copy(HOST, copy)
    host = run_host(browser_daemon.socket_path, get_token(), program=[str(copy)])
    (answer,) = answers(host.stdout)
    assert answer["code"] == "permission_denied"
    assert "is not this installation's native host" in str(answer["error"])


@pytest.mark.parametrize(
    ("stdin", "said"),
    [
        (struct.pack("=I", 0xFFFFFFFF) + b'{"id": 1}', "4294967295 bytes was announced"),
        (struct.pack("=I", 100) + b'{"id": 1', "the stream ended inside a message"),
        (struct.pack("=I", 9) + b"{not json", "not UTF-8 JSON"),
        (struct.pack("=I", 60_000) + b"[" * 60_000, "a message nests deeper than 64 levels"),
    ],
    ids=["4-GiB-length", "truncated-frame", "invalid-JSON", "nested-60-KB"],
)
def test_a_broken_stream_ends_the_host_and_the_daemon_and_other_apps_go_on(
    browser_daemon: DaemonProcess, stdin: bytes, said: str
) -> None:
    host = run_host(browser_daemon.socket_path, stdin)
    assert host.returncode == 1
    assert said in host.stderr.decode() and "Traceback" not in host.stderr.decode()
    (refusal,) = answers(host.stdout)
    assert refusal["ok"] is False and refusal["code"] == "invalid_argument"
    assert said in str(refusal["error"])
    assert browser_daemon.alive
    with BrokerClient(browser_daemon.socket_path) as client:  # another app, as before
        assert client.get_token().access_token
    again = run_host(browser_daemon.socket_path, get_token())
    assert again.returncode == 0 and answers(again.stdout)[0]["ok"] is True
