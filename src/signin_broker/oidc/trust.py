"""How a provider's TLS is verified, and what to say when a connection fails.

The CA certificates are the system's, read from its folder on demand. httpx2's
default context parses the whole CA bundle (about 140 certificates, 1.4 MB of the
daemon's memory per provider) although a provider's chain needs one of them.
Where the system keeps the same certificates as a hashed folder (Debian, Ubuntu, Arch,
Alpine: `update-ca-certificates` and `openssl rehash` write it), OpenSSL finds the
one it needs there at each handshake: the same trust, without the bundle in memory.
Elsewhere, and whenever the user names a bundle with SSL_CERT_FILE, httpx2 decides
as it always does.
"""

from __future__ import annotations

import os
import re
import ssl

# How far down an exception's causes to look for the OS's or TLS's own reason.
MAX_CAUSES = 8
# OpenSSL's names in a hashed folder: the subject's hash, a dot, a sequence number.
HASHED_NAME = re.compile(r"[0-9a-f]{8}\.\d+")


def verifying_context() -> ssl.SSLContext | bool:
    """A context that verifies with the hashed CA folder, or True for httpx2's default."""
    if os.environ.get("SSL_CERT_FILE"):
        return True
    folder = os.environ.get("SSL_CERT_DIR") or ssl.get_default_verify_paths().openssl_capath
    if not _hashed(folder):
        return True
    return ssl.create_default_context(capath=folder)


def _hashed(folder: str) -> bool:
    """Whether folder holds certificates under OpenSSL's hashed names."""
    try:
        with os.scandir(folder) as entries:
            return any(HASHED_NAME.fullmatch(entry.name) for entry in entries)
    except OSError:
        return False


def failure_reason(error: BaseException) -> str:
    """Why a connection failed, in the OS's or TLS's words: no URL, header or body in it.

    httpx2 wraps httpcore2's error, which wraps the socket's or ssl's; their own text
    carries no request data. Without one of those, the exception's type alone.
    """
    cause: BaseException | None = error
    for _ in range(MAX_CAUSES):
        if cause is None:
            break
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"the provider's TLS certificate is not trusted ({cause.verify_message}):"
                " its CA must be among the system's CA certificates (or in SSL_CERT_FILE or"
                " SSL_CERT_DIR)"
            )
        if isinstance(cause, ssl.SSLError):
            return f"TLS failed ({cause.reason or type(cause).__name__})"
        if isinstance(cause, OSError) and cause.strerror:
            return f"{type(error).__name__} ({cause.strerror})"
        cause = cause.__cause__ or cause.__context__
    return type(error).__name__
