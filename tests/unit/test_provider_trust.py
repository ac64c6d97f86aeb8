"""The providers' TLS is verified with the system's hashed CA folder, read on demand.

Each case builds a real certificate and does a real TLS handshake in memory.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx2
import pytest

from signin_broker.oidc.errors import failure_reason
from signin_broker.oidc.trust import verifying_context
from support.certificates import hashed_folder, self_signed

HANDSHAKE_ROUNDS = 20  # a TLS 1.3 handshake takes 2 or 3 rounds


def server_certificate(folder: Path, name: str) -> tuple[Path, Path]:
    certificate, key = folder / f"{name}.pem", folder / f"{name}.key"
    self_signed(certificate, key)
    return certificate, key


def handshake(client: ssl.SSLContext, certificate: Path, key: Path) -> None:
    """A TLS handshake for 127.0.0.1 between client and a server with this certificate."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certificate, key)
    wires = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    to_server, from_server, to_client, from_client = wires
    client_end = client.wrap_bio(to_client, from_client, server_hostname="127.0.0.1")
    server_end = server_context.wrap_bio(to_server, from_server, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(HANDSHAKE_ROUNDS):
        for name, end in (("client", client_end), ("server", server_end)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        to_server.write(from_client.read())
        to_client.write(from_server.read())
        if all(done.values()):
            return
    raise AssertionError("the handshake did not finish")


@pytest.fixture
def no_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)


@pytest.mark.usefixtures("no_bundle")
def test_a_hashed_folder_verifies_without_loading_a_certificate_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    certificate, key = server_certificate(tmp_path, "provider")
    monkeypatch.setenv("SSL_CERT_DIR", str(hashed_folder(tmp_path / "cas", certificate)))
    context = verifying_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.cert_store_stats()["x509_ca"] == 0
    handshake(context, certificate, key)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


@pytest.mark.usefixtures("no_bundle")
def test_a_certificate_the_folder_does_not_hold_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trusted, _ = server_certificate(tmp_path, "trusted")
    stranger, stranger_key = server_certificate(tmp_path, "stranger")
    monkeypatch.setenv("SSL_CERT_DIR", str(hashed_folder(tmp_path / "cas", trusted)))
    context = verifying_context()
    assert isinstance(context, ssl.SSLContext)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, stranger, stranger_key)


def test_a_named_bundle_is_left_to_httpx2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    certificate, _ = server_certificate(tmp_path, "provider")
    monkeypatch.setenv("SSL_CERT_DIR", str(hashed_folder(tmp_path / "cas", certificate)))
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate))
    assert verifying_context() is True


@pytest.mark.usefixtures("no_bundle")
@pytest.mark.parametrize("layout", ["unhashed", "missing", "a file"])
def test_a_folder_without_hashed_names_is_left_to_httpx2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    folder = tmp_path / "cas"
    if layout == "unhashed":
        folder.mkdir()
        server_certificate(folder, "ca-bundle")
    elif layout == "a file":
        folder.write_text("not a folder")
    monkeypatch.setenv("SSL_CERT_DIR", str(folder))
    assert verifying_context() is True


def test_a_failure_says_the_tls_or_os_reason_and_nothing_of_the_request() -> None:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "self-signed certificate"
    refused = ConnectionRefusedError(111, "Connection refused")
    for cause, expected in (
        (verify, "the provider's TLS certificate is not trusted (self-signed certificate)"),
        (refused, "ConnectError (Connection refused)"),
        (ValueError("https://idp.example/token?code=secret"), "ConnectError"),
    ):
        inner = httpx2.ConnectError("inner")
        inner.__cause__ = cause
        outer = httpx2.ConnectError(f"GET https://idp.example/?code=secret: {cause}")
        outer.__cause__ = inner
        reason = failure_reason(outer)
        assert reason.startswith(expected), reason
        assert "secret" not in reason


def test_a_loopback_http_issuer_reads_no_ca_and_its_context_trusts_no_certificate() -> None:
    context = verifying_context("http://127.0.0.1:8080")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0
    assert context.get_ca_certs() == []
