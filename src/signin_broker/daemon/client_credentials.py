"""Where this daemon's client credentials come from: the files its settings name, or the keyring.

The secret is looked up in the OS keyring (`client:<client_id>:secret`, stored with
`signin-broker client-secret set`) unless a file is named; the private key comes from
a PEM file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ..oidc.client_auth import (
    AUTO,
    PRIVATE_KEY_JWT,
    SECRET_BASIC,
    SECRET_POST,
    ClientAuth,
    ClientAuthError,
    ClientCredentials,
)
from ..oidc.credentials import (
    certificate_headers,
    check_secret,
    read_private_key,
    read_secret_file,
    secret_name,
)
from ..store.keys import KeyStore, KeyStoreUnavailable

log = logging.getLogger(__name__)


def load_client_auth(
    client_id: str,
    setting: str,
    *,
    secret_file: Path | None,
    private_key_file: Path | None,
    key_id: str,
    assertion_audience: str,
    keyring: Callable[[], KeyStore] | None,
    provider: str = "",
    certificate_file: Path | None = None,
) -> ClientAuth:
    """The client's authentication as configured; one that refuses every request if it cannot work.

    Blocking (files, the keyring): call it from a worker thread. When a credential the
    setting needs cannot be read, the reason is logged now and every request fails as
    invalid_client with it: nothing is sent unauthenticated in its place.
    """
    try:
        credentials = load_credentials(
            client_id,
            setting,
            secret_file=secret_file,
            private_key_file=private_key_file,
            key_id=key_id,
            keyring=keyring,
            provider=provider,
            certificate_file=certificate_file,
        )
    except ClientAuthError as error:
        log.error("client authentication cannot work", extra={"reason": str(error)})  # noqa: TRY400 - no traceback
        return ClientAuth(client_id, setting, problem=str(error))
    return ClientAuth(client_id, setting, credentials, assertion_audience=assertion_audience)


def load_credentials(
    client_id: str,
    setting: str,
    *,
    secret_file: Path | None = None,
    private_key_file: Path | None = None,
    key_id: str = "",
    keyring: Callable[[], KeyStore] | None,
    provider: str = "",
    certificate_file: Path | None = None,
) -> ClientCredentials:
    """Read the credentials `setting` may use; ClientAuthError when a needed one is missing.

    The keyring (None: the user chose to keep keys out of it) is asked only when a
    secret may be used and no secret file is named; with `auto`, a keyring that cannot
    be used means a public client, as no secret can have been stored there either.
    """
    private_key = read_private_key(private_key_file) if private_key_file is not None else None
    secret, source = None, ""
    if secret_file is not None:
        secret, source = read_secret_file(secret_file), f"file {secret_file}"
    elif setting in (SECRET_BASIC, SECRET_POST) or (setting == AUTO and private_key is None):
        secret = _keyring_secret(secret_name(client_id, provider), setting, keyring)
        source = "keyring" if secret is not None else ""
    if setting in (SECRET_BASIC, SECRET_POST) and secret is None:
        raise ClientAuthError(
            f"client_auth = {setting} needs the client secret: store it with"
            f" `signin-broker client-secret set --client-id {client_id}"
            f"{f' --provider {provider}' if provider else ''}`, or name a 0600"
            " file with client_secret_file"
        )
    if setting == PRIVATE_KEY_JWT and private_key is None:
        raise ClientAuthError(
            "client_auth = private_key_jwt needs client_private_key_file (a 0600 PEM file)"
        )
    certificate = (
        certificate_headers(certificate_file, private_key) if certificate_file is not None else {}
    )
    return ClientCredentials(secret, source, private_key, key_id, certificate)


def _keyring_secret(name: str, setting: str, keyring: Callable[[], KeyStore] | None) -> str | None:
    """The secret the keyring holds under name, if any (ClientAuthError: it is needed)."""
    try:
        if keyring is None:
            raise KeyStoreUnavailable("key_store is file: the keyring is not used")  # noqa: TRY301 - one handler for both
        stored = keyring().get(name)
    except KeyStoreUnavailable as error:
        if setting != AUTO:
            raise ClientAuthError(
                f"client_auth = {setting} needs the client secret, and the keyring cannot"
                f" be used ({error}); name a 0600 file with client_secret_file instead"
            ) from None
        log.debug("no keyring to hold a client secret", extra={"reason": str(error)})
        return None
    if stored is None:
        return None
    try:
        return check_secret(stored.decode())
    except (UnicodeDecodeError, ClientAuthError):
        raise ClientAuthError(
            f"the keyring's {name} is not a usable secret; store it"
            " again with `signin-broker client-secret set`"
        ) from None
