"""BrokerAuth for httpx (sync and async) and requests, against a loopback resource server."""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import requests

from signin_broker.client import BrokerError, DaemonNotRunning
from signin_broker.httpx import BrokerAuth as HttpxAuth
from signin_broker.httpx2 import BrokerAuth as Httpx2Auth
from signin_broker.requests import BrokerAuth as RequestsAuth
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.protected_api import ProtectedApi
from support.signin import signed_in_daemon
from support.tokens import access_token


def streamed() -> Iterator[bytes]:
    """A body httpx and httpx2 send in chunks, which a generator gives only once."""
    yield b'{"hello":'
    yield b" 1}"


def with_httpx(api: ProtectedApi, socket_path: Path, library: Any = httpx) -> tuple[int, dict]:
    auth = (HttpxAuth if library is httpx else Httpx2Auth)(socket_path=socket_path)
    with library.Client(auth=auth) as http:
        answer = http.post(api.url, content=streamed())
    auth.close()
    return answer.status_code, answer.json()


def with_async_httpx(
    api: ProtectedApi, socket_path: Path, library: Any = httpx
) -> tuple[int, dict]:
    async def chunks() -> AsyncIterator[bytes]:
        for chunk in streamed():
            yield chunk

    async def run() -> tuple[int, dict]:
        auth = (HttpxAuth if library is httpx else Httpx2Auth)(socket_path=socket_path)
        async with library.AsyncClient(auth=auth) as http:
            answer = await http.post(api.url, content=chunks())
        await auth.aclose()
        return answer.status_code, answer.json()

    return asyncio.run(run())


def with_requests(api: ProtectedApi, socket_path: Path) -> tuple[int, dict]:
    auth = RequestsAuth(socket_path=socket_path)
    answer = requests.post(api.url, data=b'{"hello": 1}', auth=auth, timeout=10)
    auth.close()
    return answer.status_code, answer.json()


CLIENTS: dict[str, Callable[[ProtectedApi, Path], tuple[int, dict]]] = {
    "httpx": with_httpx,
    "httpx-async": with_async_httpx,
    "httpx2": functools.partial(with_httpx, library=httpx2),
    "httpx2-async": functools.partial(with_async_httpx, library=httpx2),
    "requests": with_requests,
}


@pytest.mark.parametrize("name", list(CLIENTS))
def test_the_request_carries_the_brokers_token(
    name: str, shared_stub: StubProvider, shared_broker: DaemonProcess
) -> None:
    socket_path = shared_broker.socket_path
    with ProtectedApi(shared_stub) as api:
        status, me = CLIENTS[name](api, socket_path)
    assert (status, me["sub"]) == (200, "1001")
    assert api.seen == [access_token(socket_path)]


# The tests below renew the token (a renewal within a quarter of its lifetime is not
# made again): each has a daemon of its own.


@pytest.mark.parametrize("name", list(CLIENTS))
def test_a_401_renews_the_token_once_and_sends_again(
    name: str, stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    first = access_token(socket_path)
    refreshes = len(stub.token_requests("refresh_token"))
    with ProtectedApi(stub) as api:
        api.refuse.add(first)
        status, me = CLIENTS[name](api, socket_path)
    assert (status, me["sub"]) == (200, "1001")
    assert len(stub.token_requests("refresh_token")) == refreshes + 1
    assert api.seen == [first, access_token(socket_path)] and api.seen[1] != first
    assert api.bodies == [b'{"hello": 1}'] * 2  # a streamed body too is sent whole again
    daemon.stop()


@pytest.mark.parametrize("name", list(CLIENTS))
def test_a_second_401_is_the_callers_with_no_loop(
    name: str, stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with ProtectedApi(stub) as api:
        api.refuse_all = True
        status, body = CLIENTS[name](api, socket_path)
        assert (status, body) == (401, {"error": "invalid_token"})
        assert len(api.seen) == 2  # the first try and one resend, with a renewed token
        again, _ = CLIENTS[name](api, socket_path)  # within a quarter: no second renewal
        assert again == 401 and len(api.seen) == 3
    daemon.stop()


def test_a_denied_app_or_no_daemon_raises_the_sdks_errors(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "deny")
    with ProtectedApi(stub) as api:
        with pytest.raises(BrokerError, match="app policy denies"):
            with_httpx(api, socket_path)
        with pytest.raises(DaemonNotRunning):
            with_requests(api, folder / "nothing.sock")
        assert api.seen == []
    daemon.stop()


def test_importing_the_sdk_loads_neither_http_library() -> None:
    probe = (
        "import sys, signin_broker, signin_broker.client\n"
        "assert not {'httpx', 'httpx2', 'requests'} & sys.modules.keys(), sys.modules.keys()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
