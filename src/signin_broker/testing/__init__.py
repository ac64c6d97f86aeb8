"""Test helpers: a stub OpenID Connect provider, a daemon runner, a browser.

They serve apps' own tests and demos as well as the conformance cases. The stub
(StubProvider, importable from here) is a real provider on loopback (authlib
underneath): code flow with mandatory PKCE, device flow (RFC 8628), signed ID tokens,
rotating refresh tokens (a refresh may narrow the scope or name an RFC 8707 resource),
revocation and sign-out, plus the knobs a test needs to make sign-in fail in each way
a real provider can: refused or slow token requests, denied, expired or throttled
device codes, expiring refresh tokens, revoked users, rotated keys, and outages (down,
erroring, stalled, or garbage).

Only this file and __main__.py come with the base install; the rest is the
signin-broker-testing wheel (packaging/testing), installed as `signin-broker[testing]`.
The names below load on first use, so that without that wheel the error says what
to install.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .loopback import Tls
    from .models import RecordedRequest, StubClient, StubPaths, StubUser
    from .provider import StubProvider

MISSING_HINT = (
    "the stub provider is test tooling, not part of the base install: install the"
    " signin-broker-testing wheel of the same version (pip install 'signin-broker[testing]';"
    " in the source tree: python -m pip wheel --no-deps -w dist packaging/testing)"
)

_HOMES = {
    "RecordedRequest": "models",
    "StubClient": "models",
    "StubPaths": "models",
    "StubUser": "models",
    "StubProvider": "provider",
    "Tls": "loopback",
}

__all__ = ["RecordedRequest", "StubClient", "StubPaths", "StubProvider", "StubUser", "Tls"]


def __getattr__(name: str) -> Any:
    """The stub's public names, imported when first asked for (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f".{home}", __name__)
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{home}":
            raise
        raise ModuleNotFoundError(MISSING_HINT, name=error.name) from None
    return getattr(module, name)
