"""joserfc, the one JOSE library of the install, as this package uses it.

EdDSA is what most providers still call Ed25519 signatures; RFC 9864 deprecates the
name, and joserfc warns on every use. The broker uses it only where a provider lists it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # joserfc and cryptography load when a key is used: the settings import this
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from joserfc.jwk import Key

    PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey

# The signing algorithms each kind of key can use, the most widely accepted first.
RSA_ALGORITHMS = ("RS256", "PS256", "RS384", "PS384", "RS512", "PS512")
EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}


@contextlib.contextmanager
def eddsa_by_its_old_name() -> Iterator[None]:
    """Sign or verify with "EdDSA" without joserfc's deprecation warning."""
    from joserfc.errors import SecurityWarning

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "EdDSA is deprecated", SecurityWarning)
        yield


def signing_algorithms(key: PrivateKey) -> tuple[str, ...]:
    """The JWS algorithms this key can sign with, the most widely accepted first."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, rsa.RSAPrivateKey):
        return RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return (EC_ALGORITHMS[key.curve.name],)
    return ("EdDSA", "Ed25519")


def signing_key(key: PrivateKey) -> Key:
    """A cryptography private key as joserfc signs with it."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from joserfc.jwk import ECKey, OKPKey, RSAKey

    if isinstance(key, rsa.RSAPrivateKey):
        return RSAKey.import_key(key)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return ECKey.import_key(key)
    return OKPKey.import_key(key)
