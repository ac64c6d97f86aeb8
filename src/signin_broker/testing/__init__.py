"""A stub OpenID Connect provider for tests and demos, importable as signin_broker.testing.

It is a real provider on loopback (authlib underneath): code flow with mandatory PKCE,
signed ID tokens, rotating refresh tokens, revocation and sign-out, plus the knobs a
test needs to make sign-in fail in each way a real provider can.
"""

from .models import RecordedRequest, StubClient, StubPaths, StubUser
from .provider import StubProvider

__all__ = ["RecordedRequest", "StubClient", "StubPaths", "StubProvider", "StubUser"]
