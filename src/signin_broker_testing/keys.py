"""The stub's RS256 signing keys: the current one signs, kept older ones stay published.

An RSA key takes 50-200 ms of CPU to make, and a test run makes hundreds of stubs. The keys
of a stub that is gone (collected) go to a spare list for the next stub in this process:
no two stubs that exist at once share a key, and a rotation always brings a key new to
its stub.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from cryptography.hazmat.primitives.asymmetric import rsa
from joserfc.jwk import KeySet, RSAKey

RSA_KEY_BITS = 2048
_spare: list[RSAKey] = []  # keys of stubs that are gone
_spare_lock = threading.Lock()


class SigningKeys:
    """A current private key plus the previous ones a rotation chose to keep."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = _new_key()
        self._previous: list[RSAKey] = []
        self._every = [self._current]  # given back together when this object is collected
        weakref.finalize(self, _give_back, self._every)

    @property
    def current(self) -> RSAKey:
        """The key that signs new ID tokens; its `kid` names it in the JWKS."""
        with self._lock:
            return self._current

    def rotate(self, keep_previous: bool) -> str:
        """Start signing with a new key; returns its kid."""
        fresh = _new_key()
        with self._lock:
            self._every.append(fresh)
            self._previous = [self._current, *self._previous] if keep_previous else []
            self._current = fresh
        return str(fresh.kid)

    def public_key_set(self) -> KeySet:
        """Every published key, as joserfc verifies with it."""
        with self._lock:
            keys = [self._current, *self._previous]
        return KeySet([RSAKey.import_key(key.as_dict(private=False)) for key in keys])

    def jwks(self) -> dict[str, list[dict[str, Any]]]:
        """The JWKS document: public halves only."""
        return {"keys": [dict(key.as_dict(private=False)) for key in self.public_key_set()]}


def _new_key() -> RSAKey:
    with _spare_lock:
        if _spare:
            return _spare.pop()
    private = rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_BITS)
    key = RSAKey.import_key(private, {"use": "sig", "alg": "RS256"})
    key.ensure_kid()  # the RFC 7638 thumbprint, so every new key has a new kid
    return key


def _give_back(keys: list[RSAKey]) -> None:
    with _spare_lock:
        _spare.extend(keys)
