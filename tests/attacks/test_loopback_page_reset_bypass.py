"""Another user's request must not reach the page by resetting its connection.

The page used to look the browser's uid up when the request arrived; a client that
sent its request and then an RST (SO_LINGER 0) was gone from the kernel's socket
table by then, the lookup found nothing, and nothing counted as allowed.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

from signin_broker.client import BrokerClient, SignInState
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess
from support.fuzzing import troubled_lines
from support.other_user import other_user, run_as
from support.signin import BEGIN, CALLBACK, sign_in

SESSION_COOKIE = "signin_broker_session"
FORGED_STATE = "A" * 43
BEGINS_TO_EVICT = 70  # more than the daemon keeps pending (64): the owner's would go first


def reset_requests(authority: str, cookie: str) -> list[str]:
    """What the other user sends, each on a connection it resets at once."""
    head = f"HTTP/1.1\r\nHost: {authority}\r\n"
    callback = f"GET {CALLBACK}?code=forged&state={FORGED_STATE} {head}\r\n"
    begin = f"GET {BEGIN} {head}\r\n"
    logout = f"POST /logout {head}Cookie: {SESSION_COOKIE}={cookie}\r\nContent-Length: 0\r\n\r\n"
    return [callback] * 20 + [begin] * BEGINS_TO_EVICT + [logout] * 20


def test_another_user_resetting_its_connections_runs_no_handler(
    broker: DaemonProcess, stub: StubProvider, browser: Browser, tmp_path: Path
) -> None:
    user = other_user()
    authority = urlsplit(broker.web_url).netloc
    sign_in(browser, broker)
    cookie = browser.cookies[authority][SESSION_COOKIE]
    with Browser() as second:  # the owner's sign-in in progress, stopped at the provider
        to_provider = second.follow(second.get(broker.web_url + BEGIN), until=stub.base_url)

        page = urlsplit(broker.web_url)
        spec = tmp_path / "requests.json"
        spec.write_text(
            json.dumps(
                {
                    "address": [page.hostname, page.port],
                    "requests": reset_requests(authority, cookie),
                }
            )
        )
        assert run_as(user, spec, "http-reset") == {"sent": 110}

        # The owner's pending sign-in was not evicted: it still completes.
        back = second.follow(second.get(location(to_provider)), until=broker.web_url + CALLBACK)
        finished = second.get(location(back))
        assert finished.status_code == 303, finished.status_code
    assert broker.alive
    assert broker.logs_with(msg="sign-in failed") == []  # no forged callback was handled
    assert browser.get(broker.web_url + "/dashboard").status_code == 200  # not signed out
    with BrokerClient(broker.socket_path) as client:
        assert client.status().sign_in_state is SignInState.SIGNED_IN
    broker.expect_log(msg="refused a browser of another user")
    assert not troubled_lines(broker.lines)
