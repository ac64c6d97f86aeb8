"""Device sign-in (RFC 8628) through the daemon, against the stub: approve, deny, expiry,
slow_down, cancellation, a restart while pending, and the CLI's code and QR code."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from signin_broker.client import BrokerClient, EventKind
from signin_broker_testing import StubPaths, StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.commands import BIN
from support.events import watching
from support.state import state_files
from support.waiting import eventually

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture
def tv_stub() -> Iterator[StubProvider]:
    """A provider whose device codes ask for polling every second (tests stay quick)."""
    with StubProvider(device_interval=1) as provider:
        yield provider


@pytest.fixture
def tv_daemon(tv_stub: StubProvider, socket_path: Path) -> Iterator[DaemonProcess]:
    with DaemonProcess(socket_path, "--issuer", tv_stub.issuer) as daemon:
        yield daemon


def test_approved_on_another_device_the_session_is_ready(
    tv_stub: StubProvider, tv_daemon: DaemonProcess
) -> None:
    with watching(tv_daemon.socket_path) as events, BrokerClient(tv_daemon.socket_path) as client:
        started = client.begin_sign_in(device=True)
        assert started.device and started.interval_seconds == 1
        assert started.verification_uri == tv_stub.base_url + "/device"
        assert started.url.endswith("user_code=" + started.user_code)
        progress = events.wait_for(EventKind.SIGN_IN_PROGRESS)
        assert started.user_code in progress.detail and progress.sign_in_id == started.sign_in_id
        eventually(  # a few polls while nobody has approved yet
            lambda: len(tv_stub.device_polls(started.user_code)) >= 2, "two polls", 15, 0.05
        )
        tv_stub.approve_device(started.user_code)
        signed_in = events.wait_for(EventKind.SIGNED_IN, timeout=15)
        assert signed_in.sign_in_id == started.sign_in_id and signed_in.account == "user:1001"
        assert client.get_token().account == "user:1001"
    polls = tv_stub.device_polls(started.user_code)
    assert len(polls) >= 2
    assert tv_stub.device_polls_too_fast(started.user_code) == 0
    assert len(state_files(tv_daemon.socket_path)) == 1


@pytest.mark.parametrize(
    ("end", "error_code"),
    [("deny", "access_denied"), ("expire", "expired_token")],
)
def test_a_denied_or_expired_code_ends_the_sign_in_with_its_reason(
    tv_stub: StubProvider, tv_daemon: DaemonProcess, end: str, error_code: str
) -> None:
    with watching(tv_daemon.socket_path) as events, BrokerClient(tv_daemon.socket_path) as client:
        started = client.begin_sign_in(device=True)
        if end == "deny":
            tv_stub.deny_device(started.user_code)
        else:
            tv_stub.expire_device_code(started.user_code)
        failed = events.wait_for(EventKind.SIGN_IN_FAILED, timeout=15)
        assert failed.sign_in_id == started.sign_in_id and error_code in failed.detail
        assert client.accounts() == []
    assert tv_daemon.alive


def test_slow_down_makes_the_daemon_poll_five_seconds_slower(
    tv_stub: StubProvider, tv_daemon: DaemonProcess
) -> None:
    with watching(tv_daemon.socket_path) as events, BrokerClient(tv_daemon.socket_path) as client:
        started = client.begin_sign_in(device=True)
        tv_stub.slow_down_next_poll(started.user_code)
        deadline = time.monotonic() + 15
        while not any("every 6 s" in e.detail for e in events.events):
            assert time.monotonic() < deadline, events.events
            time.sleep(0.1)
        tv_stub.approve_device(started.user_code)  # the next poll, 6 s on, signs in
        events.wait_for(EventKind.SIGNED_IN, timeout=15)
    polls = tv_stub.device_polls(started.user_code)  # the first one was told to slow down
    gaps = [later - earlier for earlier, later in itertools.pairwise(polls)]
    assert gaps and min(gaps) >= 5.5, polls
    assert tv_stub.device_polls_too_fast(started.user_code) == 0


def test_a_new_device_sign_in_cancels_the_pending_one(
    tv_stub: StubProvider, tv_daemon: DaemonProcess
) -> None:
    with watching(tv_daemon.socket_path) as events, BrokerClient(tv_daemon.socket_path) as client:
        first = client.begin_sign_in(device=True)
        second = client.begin_sign_in(device=True)
        cancelled = events.wait_for(EventKind.SIGN_IN_FAILED)
        assert cancelled.sign_in_id == first.sign_in_id and "cancelled" in cancelled.detail
        tv_stub.approve_device(second.user_code)
        assert events.wait_for(EventKind.SIGNED_IN, timeout=15).sign_in_id == second.sign_in_id


def test_a_restart_while_pending_ends_the_sign_in_cleanly(
    tv_stub: StubProvider, socket_path: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", tv_stub.issuer).start()
    with watching(socket_path) as events, BrokerClient(socket_path) as client:
        started = client.begin_sign_in(device=True)
        events.wait_for(EventKind.SIGN_IN_PROGRESS)
        assert daemon.stop() == 0
        failed = events.wait_for(EventKind.SIGN_IN_FAILED)
        assert failed.sign_in_id == started.sign_in_id and "daemon is stopping" in failed.detail
    tv_stub.approve_device(started.user_code)  # approved too late: nobody polls any more
    with (
        DaemonProcess(socket_path, "--issuer", tv_stub.issuer),
        BrokerClient(socket_path) as client,
    ):
        assert client.accounts() == []
    assert state_files(socket_path) == []  # nothing half-stored


def test_cli_login_device_shows_the_code_and_a_qr_code(
    tv_stub: StubProvider, tv_daemon: DaemonProcess
) -> None:
    login = subprocess.Popen(
        [str(BIN / "signin-broker"), "--socket", str(tv_daemon.socket_path), "login", "--device",
         "--wait", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert login.stderr is not None
    shown = []
    for line in login.stderr:
        shown.append(line)
        if line.startswith("Waiting for the sign-in"):
            break
    text = "".join(shown)
    user_code = next(
        shown[i + 2].strip() for i, line in enumerate(shown) if "enter the code" in line
    )
    assert f"{tv_stub.base_url}/device" in text
    assert "▀" in text or "▄" in text  # half blocks
    assert "\x1b[" not in text  # stderr is a pipe here: no colour escapes in a log file
    tv_stub.approve_device(user_code)
    _, rest = login.communicate(timeout=30)
    assert login.returncode == 0, rest
    assert "Signed in as Alice Example" in rest  # the name as the provider spells it


def test_a_provider_known_only_by_its_issuer_completes_a_device_sign_in(
    socket_path: Path,
) -> None:
    paths = StubPaths(
        authorize="/protocol/openid-connect/auth",
        token="/protocol/openid-connect/token",
        device_authorization="/protocol/openid-connect/auth/device",
        device_verification="/realms/home/device",
    )
    with (
        StubProvider(paths=paths, issuer_path="/realms/home", device_interval=1) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer),
        watching(socket_path) as events,
        BrokerClient(socket_path) as client,
    ):
        started = client.begin_sign_in(device=True)
        assert started.verification_uri == stub.base_url + "/realms/home/device"
        stub.approve_device(started.user_code)
        assert events.wait_for(EventKind.SIGNED_IN, timeout=15).account == "user:1001"
        assert any(r.path == paths.device_authorization for r in stub.requests)


def test_the_qr_code_is_served_to_tv_apps_and_shown_on_the_loopback_page(
    tv_stub: StubProvider, tv_daemon: DaemonProcess
) -> None:
    with BrokerClient(tv_daemon.socket_path) as client:
        started = client.begin_sign_in(device=True)
        media_type, png = client.sign_in_qr(started.sign_in_id, png=True)
        assert media_type == "image/png" and png.startswith(b"\x89PNG")
        media_type, svg = client.sign_in_qr(started.sign_in_id)
        assert media_type == "image/svg+xml" and b"<svg" in svg
    page = httpx2.get(tv_daemon.web_url + "/").text  # the person at the desk sees it too
    assert "A device is waiting for your sign-in" in page
    assert started.user_code in page and "<svg" in page and "<script" not in page


def test_the_example_tv_app_signs_in_on_the_phone_and_uses_the_token(
    tv_stub: StubProvider, tv_daemon: DaemonProcess
) -> None:
    tv = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "tv_app.py"), tv_stub.issuer],
        env={**tv_daemon.env, "SIGNIN_BROKER_SOCKET": str(tv_daemon.socket_path)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert tv.stdout is not None
    user_code = ""
    for line in tv.stdout:
        if "enter the code" in line:
            user_code = line.split("enter the code", 1)[1].split(",", 1)[0].strip()
            break
    assert user_code, tv.stderr.read() if tv.stderr else ""
    tv_stub.approve_device(user_code)  # the person approves on their phone
    out, err = tv.communicate(timeout=60)
    assert tv.returncode == 0, err
    assert "tv: welcome, Alice Example" in out
