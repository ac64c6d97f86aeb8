"""Confidential clients against the stub, which verifies each method: secrets, signed JWTs.

First the Provider alone (device authorization, polling, refresh and revocation, each
authenticated), then the real daemon: browser sign-in, a refresh and a sign-out with
each method, a wrong secret, an unsafe secret file, and a secret stored by the CLI.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from joserfc.jwk import ECKey, RSAKey

from signin_broker.client import BrokerClient, NotSignedIn
from signin_broker.oidc.answers import DEVICE_CODE_GRANT
from signin_broker.oidc.client_auth import ASSERTION_TYPE, ClientAuth, ClientCredentials
from signin_broker.oidc.errors import OAuthError
from signin_broker.oidc.provider import Provider
from signin_broker_testing import StubClient, StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.models import DEFAULT_CLIENT
from support.commands import BIN
from support.leaks import SecretIndex
from support.signin import sign_in

SECRET = "right-" + base64.urlsafe_b64encode(os.urandom(18)).decode()
WRONG = "wrong-" + base64.urlsafe_b64encode(os.urandom(18)).decode()
KID = "test-key-1"
SECRET_METHODS = ("client_secret_basic", "client_secret_post")
CLIENT_ID = DEFAULT_CLIENT.client_id


def key_and_jwks(kind: str) -> tuple[rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, dict]:
    """A private key and the JWKS a provider registers for it."""
    if kind == "rsa":
        key: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = RSAKey.import_key(key.public_key())
    else:
        key = ec.generate_private_key(ec.SECP256R1())
        public = ECKey.import_key(key.public_key())
    return key, {"keys": [{**public.as_dict(private=False), "kid": KID}]}


def registration(method: str, jwks: dict | None = None) -> StubClient:
    secret = SECRET if method in SECRET_METHODS else ""
    return replace(
        DEFAULT_CLIENT, token_endpoint_auth_method=method, client_secret=secret, jwks=jwks
    )


def write_private(folder: Path, name: str, data: bytes, mode: int = 0o600) -> Path:
    path = folder / name
    path.write_bytes(data)
    path.chmod(mode)
    return path


def pem(key: Any) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


# -- the Provider alone ----------------------------------------------------------------------


async def device_refresh_revoke(stub: StubProvider, auth: ClientAuth) -> None:
    """A device sign-in, a refresh and a revocation, each authenticated as `auth` says."""
    provider = Provider(stub.issuer, CLIENT_ID, client_auth=auth)
    try:
        grant = await provider.device_authorization("openid profile email")
        stub.approve_device(grant.user_code)
        tokens = await provider.poll_device(grant.device_code)
        assert tokens.refresh_token is not None
        renewed = await provider.refresh(tokens.refresh_token)
        assert renewed.refresh_token is not None
        assert await provider.revoke(renewed.refresh_token, "refresh_token")
        assert stub.access_token_info(renewed.access_token)["active"] is False
    finally:
        await provider.close()


@pytest.mark.parametrize("method", SECRET_METHODS)
def test_a_secret_authenticates_every_request_and_only_as_registered(method: str) -> None:
    with StubProvider(clients=[registration(method)], device_interval=0) as stub:
        auth = ClientAuth(CLIENT_ID, "auto", ClientCredentials(SECRET))
        asyncio.run(device_refresh_revoke(stub, auth))
        paths = {stub.paths.device_authorization, stub.paths.token, stub.paths.revocation}
        sent = [r for r in stub.requests if r.path in paths]
        assert len(sent) == 4  # device authorization, poll, refresh, revocation
        for request in sent:
            if method == "client_secret_basic":
                assert request.headers["authorization"].startswith("Basic ")
                assert "client_secret" not in request.params
            else:
                assert request.params["client_secret"] == SECRET
                assert "authorization" not in request.headers


@pytest.mark.parametrize("kind", ["rsa", "ec"])
def test_a_private_key_signs_every_request(kind: str) -> None:
    key, jwks = key_and_jwks(kind)
    with StubProvider(clients=[registration("private_key_jwt", jwks)], device_interval=0) as stub:
        auth = ClientAuth(CLIENT_ID, "auto", ClientCredentials(private_key=key, key_id=KID))
        asyncio.run(device_refresh_revoke(stub, auth))
        assertions = [r.params.get("client_assertion") for r in stub.requests if r.method == "POST"]
        assert len(assertions) == 4 and len(set(assertions)) == 4  # a new one each time
        discovery = httpx2.get(stub.discovery_url).json()
        assert discovery["token_endpoint_auth_methods_supported"] == ["private_key_jwt"]


@pytest.mark.parametrize(
    ("method", "auth"),
    [
        ("client_secret_basic", ClientAuth(CLIENT_ID)),  # no secret at all
        ("client_secret_basic", ClientAuth(CLIENT_ID, "auto", ClientCredentials(WRONG))),
        ("client_secret_post", ClientAuth(CLIENT_ID, SECRET_METHODS[0], ClientCredentials(SECRET))),
        ("client_secret_post", ClientAuth(CLIENT_ID, SECRET_METHODS[1], ClientCredentials(WRONG))),
        ("none", ClientAuth(CLIENT_ID, SECRET_METHODS[0], ClientCredentials(SECRET))),
    ],
)
def test_the_stub_refuses_any_other_authentication(method: str, auth: ClientAuth) -> None:
    with StubProvider(clients=[registration(method)]) as stub:
        assert refusal_of_device_authorization(stub, auth).error == "invalid_client"


def refusal_of_device_authorization(stub: StubProvider, auth: ClientAuth) -> OAuthError:
    """How the provider refuses a device authorization request authenticated as `auth`."""

    async def attempt() -> None:
        provider = Provider(stub.issuer, CLIENT_ID, client_auth=auth)
        try:
            await provider.device_authorization("openid")
        finally:
            await provider.close()

    with pytest.raises(OAuthError) as refused:
        asyncio.run(attempt())
    return refused.value


def assertion(key: Any, **claims: Any) -> str:
    now = int(time.time())
    defaults = {"iss": CLIENT_ID, "sub": CLIENT_ID, "jti": os.urandom(8).hex()}
    return jwt.encode(
        {**defaults, "iat": now, "exp": now + 60, **claims}, key, "RS256", headers={"kid": KID}
    )


def test_the_stub_checks_each_assertion_signature_audience_lifetime_and_replay() -> None:
    key, jwks = key_and_jwks("rsa")
    other, _ = key_and_jwks("rsa")
    with StubProvider(clients=[registration("private_key_jwt", jwks)]) as stub:
        token_url = stub.base_url + stub.paths.token

        def error_for(signed: str) -> str:
            form = {
                "grant_type": DEVICE_CODE_GRANT,
                "device_code": "unknown",
                "client_assertion_type": ASSERTION_TYPE,
                "client_assertion": signed,
            }
            return str(httpx2.post(token_url, data=form).json()["error"])

        good = assertion(key, aud=token_url)
        assert error_for(good) == "invalid_grant"  # the client passed; the code is unknown
        assert error_for(good) == "invalid_client"  # the same jti again
        assert error_for(assertion(key, aud=stub.issuer)) == "invalid_grant"
        for bad in [
            assertion(other, aud=token_url),
            assertion(key, aud=stub.base_url + stub.paths.revocation),
            assertion(key, aud=token_url, exp=int(time.time()) - 3600),
            assertion(key, aud=token_url, exp=int(time.time()) + 3600),
            assertion(key, aud=token_url, iss="someone-else"),
        ]:
            assert error_for(bad) == "invalid_client"


@pytest.mark.parametrize(
    "client",
    [
        StubClient(
            CLIENT_ID, ["http://127.0.0.1/cb"], token_endpoint_auth_method="client_secret_basic"
        ),
        StubClient(CLIENT_ID, ["http://127.0.0.1/cb"], client_secret=SECRET),
        StubClient(
            CLIENT_ID, ["http://127.0.0.1/cb"], token_endpoint_auth_method="private_key_jwt"
        ),
        StubClient(
            CLIENT_ID, ["http://127.0.0.1/cb"], token_endpoint_auth_method="client_secret_jwt"
        ),
    ],
)
def test_a_stub_client_must_have_what_its_method_needs(client: StubClient) -> None:
    with pytest.raises(ValueError, match=CLIENT_ID):
        StubProvider(clients=[client])


# -- the daemon ------------------------------------------------------------------------------


@pytest.fixture
def keys_folder(folder: Path) -> Path:
    """Where a test keeps the client's secret or key: the user's alone."""
    path = folder / "client"
    path.mkdir(mode=0o700)
    return path


def signed_in(stub: StubProvider, socket_path: Path, *flags: str) -> DaemonProcess:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer, *flags).start()
    with Browser() as browser:
        response = sign_in(browser, daemon)
    assert response.status_code in (302, 303), response.text
    return daemon


def refresh_and_sign_out(stub: StubProvider, daemon: DaemonProcess) -> None:
    """A refresh grant (for a narrower token), then a sign-out that revokes at the provider."""
    with BrokerClient(daemon.socket_path) as client:
        main = client.get_token()
        narrowed = client.get_token(scopes=["openid"])
        assert narrowed.access_token != main.access_token
        assert len(stub.token_requests("refresh_token")) == 1
        assert client.sign_out().was_signed_in
        with pytest.raises(NotSignedIn):
            client.get_token()
    assert stub.access_token_info(main.access_token)["active"] is False  # revoked


@pytest.mark.parametrize("method", [*SECRET_METHODS, "private_key_jwt"])
def test_the_daemon_signs_in_refreshes_and_signs_out_as_a_confidential_client(
    method: str, socket_path: Path, keys_folder: Path
) -> None:
    if method == "private_key_jwt":
        key, jwks = key_and_jwks("rsa")
        client = registration(method, jwks)
        key_file = write_private(keys_folder, "client.pem", pem(key))
        flags = ["--client-private-key-file", str(key_file), "--client-key-id", KID]
    else:
        client = registration(method)
        secret_file = write_private(keys_folder, "secret", SECRET.encode() + b"\n")
        flags = ["--client-secret-file", str(secret_file)]
    # auto picks what the provider advertises; it lists only the client's own method
    with StubProvider(clients=[client]) as stub:
        daemon = signed_in(stub, socket_path, *flags)
        refresh_and_sign_out(stub, daemon)
        chosen = daemon.expect_log(msg="client authentication")[0]
        assert (chosen["client_auth"], chosen["setting"]) == (method, "auto")
        daemon.stop()
    assert not SecretIndex([SECRET]).found_in(daemon.output())


def test_a_wrong_secret_is_refused_with_a_clear_message_and_never_logged(
    socket_path: Path, keys_folder: Path
) -> None:
    secret_file = write_private(keys_folder, "secret", WRONG.encode())
    with StubProvider(clients=[registration("client_secret_basic")]) as stub:
        daemon = DaemonProcess(
            socket_path, "--issuer", stub.issuer, "--client-secret-file", str(secret_file)
        ).start()
        with Browser() as browser:
            page = sign_in(browser, daemon)
        assert "did not accept this broker" in page.text and "client credentials" in page.text
        refused = daemon.expect_log(msg="the provider refused the client's credentials")[0]
        assert (refused["client_auth"], refused["endpoint"]) == ("client_secret_basic", "token")
        assert refused["secret_from"] == f"file {secret_file}"
        with BrokerClient(socket_path) as client, pytest.raises(NotSignedIn):
            client.get_token()
        daemon.stop()
    assert not SecretIndex([WRONG, SECRET]).found_in(daemon.output())


def test_a_secret_file_others_can_read_stops_the_daemon(
    socket_path: Path, keys_folder: Path
) -> None:
    secret_file = write_private(keys_folder, "secret", SECRET.encode(), mode=0o644)
    daemon = DaemonProcess(
        socket_path, "--issuer", "https://id.example.com", "--client-secret-file", str(secret_file)
    ).start(wait=False)
    assert daemon.wait_exit() == 2
    assert f"other users can read or write {secret_file} (mode 0644)" in daemon.output()
    assert f"chmod 600 {secret_file}" in daemon.output()
    assert SECRET not in daemon.output()


def test_a_secret_stored_with_the_cli_is_used_and_never_in_argv(
    socket_path: Path, keys_folder: Path
) -> None:
    socket_path.parent.mkdir(mode=0o700)  # the keyring's file is beside; the daemon checks it
    daemon = DaemonProcess(socket_path)  # not started: its environment has the test keyring
    stored = subprocess.run(
        [str(BIN / "signin-broker"), "client-secret", "set", "--client-id", "signin-broker"],
        input=SECRET + "\n",
        env=daemon.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert stored.returncode == 0, stored.stderr
    assert "stored in the keyring" in stored.stderr and SECRET not in stored.stderr
    with StubProvider(clients=[registration("client_secret_post")]) as stub:
        daemon = signed_in(stub, socket_path)
        chosen = daemon.expect_log(msg="client authentication")[0]
        assert (chosen["client_auth"], chosen["secret_from"]) == ("client_secret_post", "keyring")
        assert all(SECRET not in arg for arg in daemon.args)
        daemon.stop()
    assert not SecretIndex([SECRET]).found_in(daemon.output())


# -- a provider that refuses the secret in a Basic header -------------------------------------

# A secret with characters outside RFC 6749's unreserved set: Basic sends it encoded,
# which a provider that does not decode Basic (LemonLDAP::NG) refuses.
ENCODED_SECRET = "s3cr+t/" + base64.b64encode(os.urandom(12)).decode() + "=!"
BOTH_METHODS = list(SECRET_METHODS)


def form_only(secret: str = ENCODED_SECRET) -> StubClient:
    """A client the provider takes only with the secret in the form, while it lists both."""
    return replace(registration("client_secret_post"), client_secret=secret)


def test_auto_takes_the_form_after_the_provider_refuses_an_encoded_secret_in_basic() -> None:
    with StubProvider(clients=[form_only()], token_endpoint_auth_methods=BOTH_METHODS,
                      device_interval=0) as stub:  # fmt: skip
        auth = ClientAuth(CLIENT_ID, "auto", ClientCredentials(ENCODED_SECRET))
        asyncio.run(device_refresh_revoke(stub, auth))
        sent = [r for r in stub.requests if r.method == "POST"]
        assert [("authorization" in r.headers, r.params.get("client_secret")) for r in sent] == [
            (True, None),  # Basic, refused
            *[(False, ENCODED_SECRET)] * 4,  # the form from then on: no Basic tried again
        ]


@pytest.mark.parametrize(
    ("setting", "secret", "tries"),
    [
        ("auto", "wrong+/" + WRONG, 2),  # Basic, then the form once: both refused
        ("auto", WRONG, 1),  # nothing to encode: a wrong secret is not sent twice
        ("client_secret_basic", "wrong+/" + WRONG, 1),  # a method chosen is kept
    ],
    ids=["auto-encoded", "auto-plain", "basic-chosen"],
)
def test_a_refused_secret_is_tried_in_the_form_at_most_once_and_only_under_auto(
    setting: str, secret: str, tries: int
) -> None:
    with StubProvider(clients=[form_only()], token_endpoint_auth_methods=BOTH_METHODS) as stub:
        auth = ClientAuth(CLIENT_ID, setting, ClientCredentials(secret))
        assert refusal_of_device_authorization(stub, auth).error == "invalid_client"
        assert len([r for r in stub.requests if r.method == "POST"]) == tries


def test_the_daemon_signs_in_where_basic_is_refused_and_says_which_method_worked(
    socket_path: Path, keys_folder: Path
) -> None:
    secret_file = write_private(keys_folder, "secret", ENCODED_SECRET.encode())
    with StubProvider(clients=[form_only()], token_endpoint_auth_methods=BOTH_METHODS) as stub:
        daemon = signed_in(stub, socket_path, "--client-secret-file", str(secret_file))
        daemon.expect_log(msg="client authentication works with client_secret_post",
                          instead_of="client_secret_basic")  # fmt: skip
        refresh_and_sign_out(stub, daemon)
        daemon.stop()
    assert not SecretIndex([ENCODED_SECRET]).found_in(daemon.output())
