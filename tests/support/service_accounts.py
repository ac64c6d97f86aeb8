"""A service account as a test sets one up: the client's secret or key in 0600 files, its config.

The same for every provider (the stub, oidc-provider, django-oauth-toolkit): the
provider registers a confidential client allowed the client credentials grant; the
daemon is told `grant = "client_credentials"`, the client id, and where its secret or
private key is.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from joserfc.jwk import RSAKey

KID = "kiosk-key-1"


def new_secret() -> str:
    return "kiosk-" + secrets.token_urlsafe(24)


def private_file(folder: Path, name: str, data: str | bytes) -> Path:
    """A 0600 file of the user's, as the daemon accepts a credential file."""
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(0o600)
    return path


def new_key() -> tuple[bytes, dict[str, Any]]:
    """A private key (PEM) and the JWKS a provider registers for private_key_jwt."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = RSAKey.import_key(key.public_key()).as_dict(private=False)
    return pem, {"keys": [{**public, "kid": KID, "alg": "RS256", "use": "sig"}]}


def settings(issuer: str, client_id: str, credential: Path, *, key: bool = False) -> list[str]:
    """The config lines of a service account: its grant, client, and secret or key file."""
    kind = "client_private_key_file" if key else "client_secret_file"
    lines = [
        f'issuer = "{issuer}"',
        'grant = "client_credentials"',
        f'client_id = "{client_id}"',
        f'{kind} = "{credential}"',
    ]
    return [*lines, f'client_key_id = "{KID}"'] if key else lines
