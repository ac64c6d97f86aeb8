"""Typed results of the SDK, converted from the API's messages (apps never see protobuf)."""

from __future__ import annotations

import enum
import time
from typing import Any, TypeVar

from ..v1 import broker_pb2 as pb
from ._record import Record


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


class AppDecision(enum.Enum):
    """What the user decided for an app."""

    UNSPECIFIED = "unspecified"
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


class TokenRevocation(enum.Enum):
    """What the identity provider did with the tokens of a signed-out session (RFC 7009)."""

    UNSPECIFIED = "unspecified"  # no session was signed out, or the daemon is older
    REVOKED = "revoked"
    NOT_OFFERED = "not_offered"  # the provider has no revocation: tokens live until they expire
    FAILED = "failed"  # refused or unreachable: SignOutResult.revocation_error says why


E = TypeVar("E", SignInState, EventKind, AppDecision, TokenRevocation)


def _sign_in_state(value: int) -> SignInState:
    return _enum(SignInState, pb.SignInState, value, "SIGN_IN_STATE_")


def _enum(kind: type[E], proto_enum: Any, value: int, prefix: str) -> E:
    """Map a proto enum value onto ours; values newer than this SDK read as UNSPECIFIED."""
    try:
        return kind[proto_enum.Name(value).removeprefix(prefix)]
    except (KeyError, ValueError):
        return kind.UNSPECIFIED


class Token(Record, secret=("access_token",)):
    """An access token. Its repr leaves the secret out, so logging the object is safe."""

    access_token: str
    token_type: str
    expires_at_unix: int
    scopes: tuple[str, ...]
    account: str

    @property
    def authorization(self) -> str:
        """The value of an HTTP Authorization header, e.g. "Bearer eyJ..."."""
        return f"{self.token_type} {self.access_token}"

    def seconds_left(self) -> float:
        """How long the token stays valid from now."""
        return self.expires_at_unix - time.time()

    @classmethod
    def from_proto(cls, message: pb.GetTokenResponse) -> Token:
        """Convert the API's response."""
        return cls(
            access_token=message.access_token,
            token_type=message.token_type,
            expires_at_unix=message.expires_at_unix,
            scopes=tuple(message.scopes),
            account=message.account,
        )


class Caller(Record):
    """A process as the daemon's kernel check saw it."""

    uid: int
    gid: int
    pid: int
    executable: str


class Status(Record):
    """The daemon and its sign-in state, as GetStatus reports them."""

    version: str
    pid: int
    started_at_unix: int
    socket_path: str
    issuer: str
    sign_in_state: SignInState
    default_account: str
    account_count: int
    caller: Caller
    web_url: str  # the daemon's sign-in page and dashboard
    degraded_reason: str  # why the provider is considered unreachable; "" when it answers
    last_provider_contact_unix: int
    storage: str  # where sessions survive restarts (keyring, key file, memory only)
    default: Account | None  # the default account with its token's expiry and next renewal
    started_by: str  # "socket activation", "service manager" or "manual"
    rss_bytes: int  # the daemon's resident memory
    audit_degraded_reason: str  # why audit rows are not being written; "" when they are
    providers: tuple[ProviderStatus, ...] = ()  # the configured ones, the default first

    @classmethod
    def from_proto(cls, message: pb.GetStatusResponse) -> Status:
        """Convert the API's response."""
        return cls(
            version=message.version,
            pid=message.pid,
            started_at_unix=message.started_at_unix,
            socket_path=message.socket_path,
            issuer=message.issuer,
            sign_in_state=_sign_in_state(message.sign_in_state),
            default_account=message.default_account,
            account_count=message.account_count,
            caller=Caller(
                uid=message.caller.uid,
                gid=message.caller.gid,
                pid=message.caller.pid,
                executable=message.caller.executable,
            ),
            web_url=message.web_url,
            degraded_reason=message.degraded_reason,
            last_provider_contact_unix=message.last_provider_contact_unix,
            storage=message.storage,
            default=Account.from_proto(message.default_account_detail)
            if message.HasField("default_account_detail")
            else None,
            started_by=message.started_by,
            rss_bytes=message.rss_bytes,
            audit_degraded_reason=message.audit_degraded_reason,
            providers=tuple(ProviderStatus.from_proto(p) for p in message.providers),
        )


class ProviderStatus(Record):
    """An identity provider the daemon signs in at (GetStatus)."""

    alias: str  # prefixes its accounts' ids (`work/user:1001`); "" for the main provider
    issuer: str
    is_default: bool  # where a sign-in that names no provider goes
    degraded_reason: str  # why it is considered unreachable; "" when it answers
    last_contact_unix: int
    client_id: str
    device_client_id: str  # the client of device sign-ins when it has a second one

    @classmethod
    def from_proto(cls, message: pb.Provider) -> ProviderStatus:
        """Convert the API's message."""
        return cls(
            alias=message.alias,
            issuer=message.issuer,
            is_default=message.is_default,
            degraded_reason=message.degraded_reason,
            last_contact_unix=message.last_contact_unix,
            client_id=message.client_id,
            device_client_id=message.device_client_id,
        )


class Account(Record):
    """A signed-in account."""

    id: str
    platform_user_id: str
    workspace_id: str
    display_name: str
    email: str
    is_default: bool
    access_token_expires_at_unix: int
    next_refresh_unix: int  # 0 when the token cannot be renewed
    provider: str = ""  # the alias of its identity provider; "" for the main one

    @classmethod
    def from_proto(cls, message: pb.Account) -> Account:
        """Convert the API's message."""
        return cls(
            id=message.id,
            platform_user_id=message.platform_user_id,
            workspace_id=message.workspace_id,
            display_name=message.display_name,
            email=message.email,
            is_default=message.is_default,
            access_token_expires_at_unix=message.access_token_expires_at_unix,
            next_refresh_unix=message.next_refresh_unix,
            provider=message.provider,
        )


class SignInStart(Record):
    """A sign-in the daemon began: the user opens `url`; events carry its sign_in_id.

    For a device sign-in, `user_code` is what the user enters at `verification_uri`
    on another device; `url` then has the code in it, for a QR code.
    """

    sign_in_id: str
    url: str
    expires_at_unix: int
    device: bool
    verification_uri: str
    user_code: str
    interval_seconds: int

    @classmethod
    def from_proto(cls, message: pb.BeginSignInResponse) -> SignInStart:
        """Convert the API's response."""
        return cls(
            sign_in_id=message.sign_in_id,
            url=message.sign_in_url,
            expires_at_unix=message.expires_at_unix,
            device=message.method == pb.SIGN_IN_METHOD_DEVICE_CODE,
            verification_uri=message.verification_uri,
            user_code=message.user_code,
            interval_seconds=message.interval_seconds,
        )


class SignOutResult(Record):
    """What a sign-out did, here and at the identity provider."""

    was_signed_in: bool
    logout_url: str
    revocation: TokenRevocation
    revocation_error: str  # why, when revocation is FAILED

    @classmethod
    def from_proto(cls, message: pb.SignOutResponse) -> SignOutResult:
        """Convert the API's response."""
        return cls(
            message.was_signed_in,
            message.logout_url,
            _enum(TokenRevocation, pb.TokenRevocation, message.revocation, "TOKEN_REVOCATION_"),
            message.revocation_error,
        )


class Event(Record):
    """A session event from WatchEvents."""

    kind: EventKind
    account: str
    occurred_at_unix_ms: int
    sign_in_state: SignInState
    detail: str
    sign_in_id: str  # for the outcome of a sign-in begun with begin_sign_in()

    @classmethod
    def from_proto(cls, message: pb.WatchEventsResponse) -> Event:
        """Convert the API's message."""
        return cls(
            kind=_enum(EventKind, pb.EventKind, message.kind, "EVENT_KIND_"),
            account=message.account,
            occurred_at_unix_ms=message.occurred_at_unix_ms,
            sign_in_state=_sign_in_state(message.sign_in_state),
            detail=message.detail,
            sign_in_id=message.sign_in_id,
        )


class App(Record):
    """An app that called the daemon or is in the user's policy, with its decision."""

    id: str  # what `set_app_policy` and the policy file name it by
    executable: str
    script: str  # what an interpreter runs; "" for a native program
    decision: AppDecision
    decided: bool  # False: the daemon's default for new apps applies
    accounts: tuple[str, ...]  # the accounts it may use; () for all
    scopes: tuple[str, ...]  # the scopes it may get at most; () for the sign-in's
    last_used_unix: int
    tokens_issued: int
    last_pid: int
    waiting: bool  # a request of it waits for the user's answer
    sha256: str  # the pinned program file; "" when not pinned

    @classmethod
    def from_proto(cls, message: pb.App) -> App:
        """Convert the API's message."""
        return cls(
            id=message.id,
            executable=message.executable,
            script=message.script,
            decision=_decision(message.decision),
            decided=message.decided,
            accounts=tuple(message.accounts),
            scopes=tuple(message.scopes),
            last_used_unix=message.last_used_unix,
            tokens_issued=message.tokens_issued,
            last_pid=message.last_pid,
            waiting=message.waiting,
            sha256=message.sha256,
        )


class AppList(Record):
    """The apps and the policy they are judged by."""

    apps: tuple[App, ...]
    default_decision: AppDecision  # for apps not in the policy file
    policy_file: str
    policy_error: str  # why the file cannot be used (the last good policy applies); "" if fine

    @classmethod
    def from_proto(cls, message: pb.ListAppsResponse) -> AppList:
        """Convert the API's response."""
        return cls(
            apps=tuple(App.from_proto(app) for app in message.apps),
            default_decision=_decision(message.default_decision),
            policy_file=message.policy_file,
            policy_error=message.policy_error,
        )


class AuditEvent(Record):
    """One row of the daemon's audit log."""

    id: int
    created_unix: int
    actor_app: str
    actor_uid: int
    actor_pid: int
    target_account: str  # "" for daemon-wide rows
    action: str  # create, update, delete, read_admin, issue_token
    resource: str
    resource_id: str
    payload_json: str

    @classmethod
    def from_proto(cls, message: pb.AuditEvent) -> AuditEvent:
        """Convert the API's message."""
        return cls(
            id=message.id,
            created_unix=message.created_unix,
            actor_app=message.actor_app,
            actor_uid=message.actor_uid,
            actor_pid=message.actor_pid,
            target_account=message.target_account,
            action=message.action,
            resource=message.resource,
            resource_id=message.resource_id,
            payload_json=message.payload_json,
        )


def _decision(value: int) -> AppDecision:
    return _enum(AppDecision, pb.AppDecision, value, "APP_DECISION_")
