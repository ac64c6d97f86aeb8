"""Why a session request failed, in terms the gRPC layer maps onto status codes."""

from __future__ import annotations


class SessionError(Exception):
    """Base of the errors a caller may see; the message is safe to show (no secrets)."""


class SignInRequired(SessionError):
    """The account has no session: the user must sign in."""

    def __init__(self) -> None:
        super().__init__("sign-in required")


class AccountNotFound(SessionError):
    """The account does not exist, or the caller may not use it: deliberately the same."""

    def __init__(self) -> None:
        super().__init__("not found")


class NotConfigured(SessionError):
    """The daemon lacks a setting that this request needs."""
