"""oidc-agent, the incumbent, signed in to the benchmark's stub provider.

Its account is made by importing a refresh token (`oidc-gen --rt-env`), which the stub
issues to oidc-agent's own confidential client through a device sign-in approved in
place: no browser, no password prompt, nothing secret on a command line. Then
`oidc-token bench` is the incumbent's one-shot, beside `signin-broker token`.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

import httpx2

from signin_broker_testing import StubProvider
from signin_broker_testing.models import StubClient

ACCOUNT = "bench"
# oidc-gen takes only http://localhost:<port> (or its own scheme) as a redirect URI.
REDIRECT_URI = "http://localhost:4242/"
PASSWORD = secrets.token_urlsafe(16)  # encrypts the account file in a throw-away folder
CLIENT = StubClient(
    client_id="oidc-agent",
    redirect_uris=[REDIRECT_URI],
    token_endpoint_auth_method="client_secret_basic",
    client_secret=secrets.token_urlsafe(24),
)


def installed() -> bool:
    return all(shutil.which(tool) for tool in ("oidc-agent", "oidc-gen", "oidc-token"))


@contextlib.contextmanager
def oidc_agent(stub: StubProvider, user: tuple[int, int] | None = None) -> Iterator[list[str]]:
    """A running oidc-agent holding an account at `stub`; yields the one-shot command.

    The stub must list CLIENT among its clients. OIDC_SOCK is set in this process's
    environment while the agent runs, so the command works as it is. `user`: the uid
    and gid the agent and its tools run as (root may give one; a login node's users
    each run their own).
    """
    folder = tempfile.mkdtemp(prefix="sb-oidc-agent-", dir="/tmp")
    as_user: dict[str, Any] = {}
    if user is not None:
        os.chown(folder, *user)
        as_user = {"user": user[0], "group": user[1], "extra_groups": []}
    env = {**os.environ, "HOME": folder, "OIDC_CONFIG_DIR": f"{folder}/oidc-agent"}
    started = subprocess.run(
        ["oidc-agent", "--no-autoload", "--no-webserver"],
        **as_user,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    agent_socket = _exported(started.stdout, "OIDC_SOCK")
    agent_pid = int(_exported(started.stdout, "OIDCD_PID"))
    try:
        env |= {"OIDC_SOCK": agent_socket, "OIDC_REFRESH_TOKEN": _refresh_token(stub)}
        subprocess.run(
            [
                "oidc-gen",
                "--manual",
                f"--iss={stub.issuer}",
                f"--client-id={CLIENT.client_id}",
                f"--client-secret={CLIENT.client_secret}",
                f"--redirect-uri={REDIRECT_URI}",
                "--scope=openid offline_access",
                "--rt-env",
                "--pw-env=OIDC_ENCRYPTION_PW",
                "--no-url-call",
                ACCOUNT,
            ],
            **as_user,
            env=env | {"OIDC_ENCRYPTION_PW": PASSWORD},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
            timeout=30,
        )
        os.environ["OIDC_SOCK"] = agent_socket
        command = ["oidc-token", ACCOUNT]
        subprocess.run(command, **as_user, capture_output=True, check=True, timeout=30)  # it works
        yield command
    finally:
        os.environ.pop("OIDC_SOCK", None)
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent_pid, signal.SIGTERM)
        shutil.rmtree(folder, ignore_errors=True)


def _refresh_token(stub: StubProvider) -> str:
    """A refresh token for CLIENT, from a device sign-in approved as the stub's user."""
    endpoints = httpx2.get(stub.discovery_url, timeout=10).json()
    auth = (CLIENT.client_id, CLIENT.client_secret)
    pending = httpx2.post(
        endpoints["device_authorization_endpoint"],
        data={"scope": "openid offline_access"},
        auth=auth,
        timeout=10,
    ).json()
    stub.approve_device(pending["user_code"])
    issued = httpx2.post(
        endpoints["token_endpoint"],
        data={
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
            "device_code": pending["device_code"],
        },
        auth=auth,
        timeout=10,
    ).json()
    return str(issued["refresh_token"])


def _exported(script: str, name: str) -> str:
    """A variable from the shell lines oidc-agent prints (`NAME=value; export NAME;`)."""
    found = re.search(rf"\b{name}=([^;]+);", script)
    if found is None:
        raise RuntimeError(f"oidc-agent printed no {name}: {script!r}")
    return found.group(1)
