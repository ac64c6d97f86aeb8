"""signin-broker's test tooling: a stub OpenID Connect provider, a daemon runner, a browser.

They serve apps' own tests and demos as well as the conformance cases. The stub
(StubProvider, importable from here) is a real provider on loopback (authlib
underneath): code flow with mandatory PKCE, device flow (RFC 8628), signed ID tokens,
rotating refresh tokens (a refresh may narrow the scope or name an RFC 8707 resource),
revocation and sign-out, plus the knobs a test needs to make sign-in fail in each way
a real provider can: refused or slow token requests, denied, expired or throttled
device codes, expiring refresh tokens, revoked users, rotated keys, and outages (down,
erroring, stalled, or garbage).

This is the signin-broker-testing distribution, a top-level package of its own beside
the base `signin_broker` (`pip install 'signin-broker[testing]'`). The names below load
on first use, so that importing a submodule (the daemon runner, the browser) does not
load the provider and its server stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .loopback import Tls
    from .models import RecordedRequest, StubClient, StubPaths, StubUser
    from .provider import StubProvider

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
    return getattr(importlib.import_module(f".{home}", __name__), name)
