"""What the daemon itself refuses a caller, beside the sessions' refusals (session.errors).

Each is a SessionError, so the API maps it onto a gRPC status like any other
(api/statuses.py) and its message is safe to show: the app policy's refusals (apps/),
and the forwards' (api/forwards.py, api/forward_calls.py).
"""

from __future__ import annotations

from ..session.errors import SessionError


class AppDenied(SessionError):
    """The user's policy refuses the app (or the user did not answer in time)."""


class UnknownApp(SessionError):
    """No known app matches what the user named (or more than one does)."""


class NewAccountNotAllowed(SessionError):
    """An app limited to some accounts asked for a sign-in without naming one of them."""


class NothingWaits(SessionError):
    """An answer for this request only, and no request of the app waits for one."""


class NotABrowserApp(SessionError):
    """Web origins were given for an app that is no browser extension."""


class FixedAtOpening(SessionError):
    """A forward's policy is the one it was opened with: no rule of the policy file changes it."""


class ForwardExists(SessionError):
    """A forward of that name is open already."""


class ForwardNotFound(SessionError):
    """No forward of that name is open."""


class NoAccountToForward(SessionError):
    """A forward of the default account was asked for, and no account is signed in."""
