"""joserfc, the one JOSE library of the install, as this package uses it.

EdDSA is what most providers still call Ed25519 signatures; RFC 9864 deprecates the
name, and joserfc warns on every use. The broker uses it only where a provider lists it.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

from joserfc.errors import SecurityWarning

if TYPE_CHECKING:
    from joserfc.jwk import Key

    from .client_auth import PrivateKey


@contextlib.contextmanager
def eddsa_by_its_old_name() -> Iterator[None]:
    """Sign or verify with "EdDSA" without joserfc's deprecation warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "EdDSA is deprecated", SecurityWarning)
        yield


def signing_key(key: PrivateKey) -> Key:
    """A cryptography private key as joserfc signs with it."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from joserfc.jwk import ECKey, OKPKey, RSAKey

    if isinstance(key, rsa.RSAPrivateKey):
        return RSAKey.import_key(key)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return ECKey.import_key(key)
    return OKPKey.import_key(key)
