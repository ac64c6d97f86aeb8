"""How a provider's TLS is verified: with the system's CA certificates, read on demand.

httpx2's default context parses the whole CA bundle (about 140 certificates, 1.4 MB
of the daemon's memory per provider) although a provider's chain needs one of them.
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

# OpenSSL's names in a hashed folder: the subject's hash, a dot, a sequence number.
HASHED_NAME = re.compile(r"[0-9a-f]{8}\.\d+")


def verifying_context(issuer: str = "") -> ssl.SSLContext | bool:
    """A context that verifies with the hashed CA folder, or True for httpx2's default.

    An http:// issuer (loopback only: options.py) is reached without TLS, and gets a
    context that trusts no certificate: no CA is read for it (3.5 MB and 0.1 s where
    SSL_CERT_FILE names a bundle), and an https:// address it names fails verification.
    """
    if issuer.startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, against nothing
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
