"""Typed results of the SDK, read from the API's messages (apps never see protobuf).

A model names the message it is read from; its fields are read from the message's
fields of the same name, guided by the message's descriptor: repeated fields become
tuples, enums ours, messages the model of that message. The few fields without a
namesake say where they come from (`sources`).
"""

from __future__ import annotations

import enum
import operator
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ..states import EventKind, SignInState
from ..v1 import broker_pb2 as pb
from ._record import Record

if TYPE_CHECKING:
    from google._upb import _message as upb
    from google.protobuf import descriptor
    from google.protobuf.message import Message

    # protobuf describes messages with its own descriptors or, compiled, with upb's
    FieldDescriptor = descriptor.FieldDescriptor | upb.FieldDescriptor
    EnumDescriptor = descriptor.EnumDescriptor | upb.EnumDescriptor


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


# The SDK's enum for each enum of the API, by the API's name (ours are named the same).
ENUMS: dict[str, type[enum.Enum]] = {
    kind.__name__: kind for kind in (SignInState, EventKind, AppDecision, TokenRevocation)
}

Reader = Callable[[Any], Any]
_MODELS: dict[str, type[Model]] = {}  # by the full name of the message each is read from


class Model(Record):
    """A Record read from one API message by `from_proto`.

    Subclasses name the message (`message=pb.Account`) and, for fields the message has
    no namesake of, a reader of the message each (`sources={"url": ...}`).
    """

    _message: ClassVar[type[Message]]
    _sources: ClassVar[Mapping[str, Reader]] = {}
    _readers: ClassVar[tuple[Reader, ...]] = ()

    def __init_subclass__(
        cls,
        message: type[Message] | None = None,
        sources: Mapping[str, Reader] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if message is not None:
            cls._message = message
            _MODELS[message.DESCRIPTOR.full_name] = cls
        cls._sources = sources or {}
        cls._readers = ()  # worked out on first use: importing the SDK stays cheap

    @classmethod
    def from_proto(cls, message: Message) -> Self:
        """Read the API's message."""
        readers = cls._readers or cls._compile()
        return cls(*[read(message) for read in readers])

    @classmethod
    def _compile(cls) -> tuple[Reader, ...]:
        fields = cls._message.DESCRIPTOR.fields_by_name
        readers = []
        for name in cls._fields:
            if name in cls._sources:
                readers.append(cls._sources[name])
            elif name in fields:
                readers.append(_reader(fields[name]))
            else:
                raise TypeError(f"{cls.__name__}.{name}: no field of that name and no source")
        cls._readers = tuple(readers)
        return cls._readers


def _reader(field: FieldDescriptor) -> Reader:
    """How to read one field of a message as the SDK's value."""
    name = field.name
    convert: Reader
    if field.enum_type is not None:
        convert = _enum_reader(field.enum_type)
    elif field.message_type is not None:
        convert = _MODELS[field.message_type.full_name].from_proto
    elif field.is_repeated:
        return lambda message: tuple(getattr(message, name))
    else:
        return operator.attrgetter(name)
    if field.is_repeated:
        return lambda message: tuple(map(convert, getattr(message, name)))
    return lambda message: convert(getattr(message, name))


def _enum_reader(proto_enum: EnumDescriptor) -> Reader:
    """Our member for each number of an API enum; numbers newer than this SDK: UNSPECIFIED."""
    kind: Any = ENUMS[proto_enum.name]
    prefix = proto_enum.values_by_number[0].name.removesuffix("UNSPECIFIED")  # "EVENT_KIND_"
    members = {
        value.number: kind.__members__.get(value.name.removeprefix(prefix), kind.UNSPECIFIED)
        for value in proto_enum.values
    }
    return lambda number: members.get(number, kind.UNSPECIFIED)


class Token(Model, message=pb.GetTokenResponse, secret=("access_token", "id_token")):
    """An access token. Its repr leaves the secrets out, so logging the object is safe."""

    access_token: str
    token_type: str
    expires_at_unix: int
    scopes: tuple[str, ...]
    account: str
    id_token: str = ""  # only when asked for (get_token(id_token=True)) and allowed
    id_token_expires_at_unix: int = 0
    acr: str = ""  # the sign-in's authentication context class; "" when the provider named none
    auth_time_unix: int = 0  # when the person authenticated for it; 0 when not said
    # Why a DPoP-bound token is: "setting" (the `dpop` setting), "provider" (it requires
    # DPoP of the client); "" for a Bearer token.
    dpop_bound_by: str = ""

    @property
    def authorization(self) -> str:
        """The value of an HTTP Authorization header, e.g. "Bearer eyJ..."."""
        return f"{self.token_type} {self.access_token}"

    def seconds_left(self) -> float:
        """How long the token stays valid from now."""
        return self.expires_at_unix - time.time()


class DpopProof(Model, message=pb.SignDpopProofResponse, secret=("access_token", "dpop")):
    """A token with a DPoP proof (RFC 9449) for one request; its repr leaves the secrets out.

    Send `headers` with that one request (method and URL as asked): a proof is
    single-use, and a DPoP-bound token is refused without one.
    """

    dpop: str  # the DPoP header's value; "" for a token that is not bound (Bearer)
    access_token: str
    token_type: str
    expires_at_unix: int
    scopes: tuple[str, ...]
    account: str

    @property
    def authorization(self) -> str:
        """The value of the Authorization header: "DPoP eyJ..." (or "Bearer ...")."""
        return f"{self.token_type} {self.access_token}"

    @property
    def headers(self) -> dict[str, str]:
        """Authorization, and DPoP when the token is bound."""
        return {"Authorization": self.authorization, **({"DPoP": self.dpop} if self.dpop else {})}


class Caller(Model, message=pb.Caller):
    """A process as the daemon's kernel check saw it."""

    uid: int
    gid: int
    pid: int
    executable: str


class Account(Model, message=pb.Account):
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
    at_risk: str = ""  # why the session is at risk and what happens next; "" when it is not
    username: str = ""  # the login at the provider (preferred_username); "" when none was sent
    aliases: tuple[str, ...] = ()  # the names you gave it (`signin-broker accounts alias`)
    acr: str = ""  # its sign-in's authentication context class; "" when none was named
    auth_time_unix: int = 0  # when the person authenticated for its sign-in; 0 when not said
    # Why its tokens are DPoP-bound: "setting" (its provider's `dpop` setting asks for it),
    # "provider" (the provider requires DPoP of the client); "" for Bearer tokens.
    dpop_bound_by: str = ""
    # A service account: the provider's client itself (the client credentials grant), no
    # person; at_risk says why the provider refuses its grant, while it does.
    service_account: bool = False


class ProviderStatus(
    Model,
    message=pb.Provider,
    sources={"setting_sources": lambda message: MappingProxyType(dict(message.setting_sources))},
):
    """An identity provider the daemon signs in at (GetStatus)."""

    alias: str  # prefixes its accounts' ids (`work/user:1001`); "" for the main provider
    issuer: str
    is_default: bool  # where a sign-in that names no provider goes
    degraded_reason: str  # why it is considered unreachable; "" when it answers
    last_contact_unix: int  # 0 when it has not answered yet
    client_id: str
    device_client_id: str  # the client of device sign-ins when it has a second one; else ""
    clock_problem: str = ""  # how far this device's clock is off the provider's; "" if not
    # Where each setting that is not a default was set: {"issuer": "from /etc/xdg/..."}.
    setting_sources: Mapping[str, str] = MappingProxyType({})
    dpop: str = ""  # the `dpop` setting: if-required, auto, require or off (RFC 9449)
    dpop_required: bool = False  # the provider requires DPoP of the client (a sign-in learned)
    dpop_required_since_unix: int = 0  # when a sign-in learned it; 0 when not known
    dpop_required_reason: str = ""  # what the provider answered that showed it
    dpop_required_until_unix: int = 0  # when it is forgotten unless learned again
    grant: str = ""  # authorization_code (people sign in) or client_credentials (a service)


class EndedSession(Model, message=pb.EndedSession):
    """A session that ended without anyone asking; its account must sign in again."""

    account: str
    display_name: str
    kind: EventKind  # REVOKED by the provider, or SIGNED_OUT when its token expired
    reason: str
    ended_at_unix: int


class Forward(Model, message=pb.Forward):
    """A forward: a socket of its own whose connections get the tokens it allows.

    On the host (`forwards()`, `open_forward`) with its socket and use; read through a
    forward (`Status.forward`), the host's details are left out.
    """

    name: str  # its connections are the app `forward:<name>`
    socket_path: str
    accounts: tuple[str, ...]  # the account ids it gives tokens of; empty: every account
    scopes: tuple[str, ...]  # at most these (down-scoped); empty: the sign-in's
    audience: str  # every token's audience (RFC 8707); "" for none
    id_token: bool  # gives the ID token when asked
    confirm: bool  # each new connection's first request waits for the person's answer
    opened_at_unix: int
    expires_at_unix: int  # when it closes itself
    tokens_issued: int
    last_used_unix: int  # 0 when it has given no token yet
    connections: int  # open now
    connections_total: int  # since it was opened
    host: str  # the daemon's host name: what it is a forward of


class TokenFile(Model, message=pb.TokenFile):
    """A file the daemon keeps an account's token in, for programs that read one from a file."""

    name: str  # `[token_files.<name>]`; the app `file:<name>` in the policy and the audit
    path: str
    format: str  # token, header, json or env
    account: str  # whose token it holds (before it holds one: as configured, "" the default)
    scopes: tuple[str, ...]
    audience: str
    written_at_unix: int  # 0 when this daemon has not written it
    next_write_unix: int  # when it is looked at next, at the latest; 0 when not planned
    expires_at_unix: int  # of the token it holds; 0 when there is no file
    problem: str  # why it is not written or was removed, and what to do; "" when all is well


def _forward(message: pb.GetStatusResponse) -> Forward | None:
    return Forward.from_proto(message.forward) if message.HasField("forward") else None


def _default_account(message: pb.GetStatusResponse) -> Account | None:
    detail = message.default_account_detail
    return Account.from_proto(detail) if message.HasField("default_account_detail") else None


class Status(
    Model,
    message=pb.GetStatusResponse,
    sources={"default": _default_account, "forward": _forward},
):
    """The daemon and its sign-in state, as GetStatus reports them."""

    version: str
    pid: int
    started_at_unix: int
    socket_path: str
    issuer: str  # the default provider's, as are degraded_reason and the last contact
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
    ended_sessions: tuple[EndedSession, ...] = ()  # ended by themselves; sign in again
    storage_problem: str = ""  # why sessions cannot be saved now; "" when they can
    config_warnings: tuple[str, ...] = ()  # settings' files: a managed file gone, say
    alias_conflicts: tuple[str, ...] = ()  # aliases refused as another's login; what to do
    forward: Forward | None = None  # set when asked through a forward: which one, of what
    token_files: tuple[TokenFile, ...] = ()  # the files the daemon keeps tokens in


def _is_device(message: pb.BeginSignInResponse) -> bool:
    return message.method == pb.SIGN_IN_METHOD_DEVICE_CODE


class SignInStart(
    Model,
    message=pb.BeginSignInResponse,
    sources={"url": lambda message: message.sign_in_url, "device": _is_device},
):
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


class SignOutResult(Model, message=pb.SignOutResponse):
    """What a sign-out did, here and at the identity provider."""

    was_signed_in: bool
    logout_url: str
    revocation: TokenRevocation
    revocation_error: str  # why, when revocation is FAILED


class Event(Model, message=pb.WatchEventsResponse):
    """A session event from WatchEvents."""

    kind: EventKind
    account: str
    occurred_at_unix_ms: int
    sign_in_state: SignInState
    detail: str
    sign_in_id: str  # for the outcome of a sign-in begun with begin_sign_in()


class App(Model, message=pb.App):
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
    id_token: bool = False  # it may have the account's ID token as well
    origins: tuple[str, ...] = ()  # a browser extension's web origins; () for none


class AppList(Model, message=pb.ListAppsResponse):
    """The apps and the policy they are judged by."""

    apps: tuple[App, ...]
    default_decision: AppDecision  # for apps not in the policy file
    policy_file: str
    policy_error: str  # why the file cannot be used (the last good policy applies); "" if fine


class AuditEvent(Model, message=pb.AuditEvent):
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
    times: int = 1  # how many times: a token given again to the same program counts here
    last_unix: int = 0  # when it last happened; 0 when it happened once
