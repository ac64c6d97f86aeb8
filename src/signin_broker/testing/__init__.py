"""Test helpers shipped in the package: a stub OpenID Connect provider, a daemon runner, a browser.

They serve apps' own tests and demos as well as the conformance cases. The stub
(StubProvider, importable from here) is a real provider on loopback (authlib
underneath): code flow with mandatory PKCE, device flow (RFC 8628), signed ID tokens,
rotating refresh tokens (a refresh may narrow the scope or name an RFC 8707 resource),
revocation and sign-out, plus the knobs a test needs to make sign-in fail in each way
a real provider can: refused or slow token requests, denied, expired or throttled
device codes, expiring refresh tokens, revoked users, rotated keys, and outages (down,
erroring, stalled, or garbage).
"""

from .models import RecordedRequest, StubClient, StubPaths, StubUser
from .provider import StubProvider

__all__ = ["RecordedRequest", "StubClient", "StubPaths", "StubProvider", "StubUser"]
