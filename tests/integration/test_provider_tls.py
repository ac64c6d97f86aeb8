"""A provider over https: its certificate is verified (oidc/trust.py); distrust signs no one out.

The stub serves TLS with a certificate made here; the daemon trusts it through a hashed
CA folder (SSL_CERT_DIR), as a system's /etc/ssl/certs holds its CAs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider, Tls
from signin_broker_testing.daemon import DaemonProcess
from support.certificates import hashed_folder, self_signed
from support.loopback_http import honoured
from support.signin import signed_in_daemon
from support.waiting import eventually


@pytest.fixture
def https_stub(tmp_path: Path) -> Iterator[StubProvider]:
    certificate, key = tmp_path / "provider.pem", tmp_path / "provider.key"
    self_signed(certificate, key)
    with StubProvider(tls=Tls(str(certificate), str(key))) as provider:
        yield provider


def trusting(folder: Path, name: str) -> Path:
    """A hashed CA folder holding only a new certificate of its own."""
    certificate = folder / f"{name}.pem"
    self_signed(certificate, folder / f"{name}.key")
    return hashed_folder(folder / f"{name}-cas", certificate)


def test_a_provider_over_https_is_verified_and_a_distrusted_one_signs_no_one_out(
    https_stub: StubProvider, socket_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert https_stub.issuer.startswith("https://127.0.0.1:")
    provider_certificate = tmp_path / "provider.pem"
    trusted = hashed_folder(tmp_path / "trusted", provider_certificate)
    monkeypatch.setenv("SSL_CERT_DIR", str(trusted))  # for the test's browser
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    daemon = signed_in_daemon(https_stub, socket_path, env={"SSL_CERT_DIR": str(trusted)})
    with BrokerClient(socket_path) as client:
        token = client.get_token()
    assert honoured(https_stub, token.access_token)
    daemon.stop()

    # The same stored session under a CA folder that does not hold the provider's CA.
    distrusting = trusting(tmp_path, "stranger")
    with (
        DaemonProcess(
            socket_path,
            "--issuer",
            https_stub.issuer,
            "--revalidate-seconds",
            "1",
            env={"SSL_CERT_DIR": str(distrusting)},
        ),
        BrokerClient(socket_path) as client,
    ):
        reason = eventually(
            lambda: client.status().degraded_reason, "the provider seen as unreachable"
        )
        assert "certificate" in reason.lower(), reason
        assert client.get_token().access_token == token.access_token  # still signed in
        assert client.status().default is not None
