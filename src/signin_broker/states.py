"""Where sign-in stands and what happens to a session, by name: one home for the daemon and the SDK.

broker.proto's SignInState and EventKind, as Python enums both sides use: the session
layer publishes these kinds and states, the daemon maps them onto the API's by name
(daemon/api/messages.py), and the SDK reads the API's back into them. A test fails when
the proto gains a value these do not have. UNSPECIFIED is what an SDK reads of a value
newer than itself; SNAPSHOT is the first event of a watch, which only the API makes.
"""

from __future__ import annotations

import enum


class SignInState(enum.Enum):
    """Where sign-in stands."""

    UNSPECIFIED = "unspecified"
    NOT_CONFIGURED = "not_configured"
    SIGNED_OUT = "signed_out"
    SIGNED_IN = "signed_in"


class EventKind(enum.Enum):
    """What happened to a session."""

    UNSPECIFIED = "unspecified"
    SNAPSHOT = "snapshot"
    SIGNED_IN = "signed_in"
    SIGNED_OUT = "signed_out"
    REFRESHED = "refreshed"
    REVOKED = "revoked"
    SIGN_IN_FAILED = "sign_in_failed"
    DEGRADED = "degraded"
    RECOVERED = "recovered"
    SIGN_IN_PROGRESS = "sign_in_progress"
