"""The one table of the daemon's calls that both clients are built from.

Each row is an SDK method: a function that builds the request gives it its
parameters and docstring; the row adds the RPC it sends and how the response becomes
the SDK's result. BrokerClient and AsyncBrokerClient inherit the rows and differ only
in how a call is made (blocking or awaited), so each method exists on both with the
same parameters, and errors map the same way (`_errors.translate`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Self, TypeVar, overload

from ..locations import STEP_UP_TIMEOUT_SECONDS
from ..v1 import broker_pb2 as pb
from ._models import (
    Account,
    App,
    AppDecision,
    AppList,
    AuditEvent,
    DpopProof,
    Event,
    Forward,
    SignInStart,
    SignOutResult,
    Status,
    Token,
)

if TYPE_CHECKING:
    from google.protobuf.message import Message


P = ParamSpec("P")
R = TypeVar("R")
Build = TypeVar("Build", bound=Callable[..., Any])
Method = TypeVar("Method", bound=Callable[..., Any])


class _Row(Generic[Build]):
    """What every row has: the RPC, the request's builder, and the method's look."""

    def __init__(self, rpc: str, build: Build, convert: Callable[[Any], Any]) -> None:
        self.rpc = rpc
        self.build = build
        self.convert = convert
        self.__name__ = build.__name__
        self.__doc__ = build.__doc__

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:  # the unbound method's, with `self`
        self_ = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return self.signature.replace(parameters=[self_, *self.signature.parameters.values()])

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        """The bound method's parameters: the builder's (its return is the request)."""
        return inspect.signature(self.build).replace(return_annotation=inspect.Signature.empty)

    def present(self, method: Method, owner: type) -> Method:
        """Give a bound method this row's name, docstring and signature."""
        method.__name__ = self.__name__
        method.__qualname__ = f"{owner.__name__}.{self.__name__}"
        method.__doc__ = self.__doc__
        method.__signature__ = self.signature  # type: ignore[attr-defined]
        return method

    def __call__(self, client: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Called on the class with the client first, as a method can be."""
        return getattr(client, self.__name__)(*args, **kwargs)


class Unary(_Row[Callable[P, "Message"]], Generic[P, R]):
    """A row whose RPC answers once: BrokerClient returns R, AsyncBrokerClient awaits it.

    `wait` gives the seconds a request may wait for the person beyond the client's
    timeout (a token request for a step-up waits for a sign-in).
    """

    convert: Callable[[Any], R]
    wait: Callable[[Any], float] = staticmethod(lambda request: 0.0)

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, client: BlockingApi, owner: type[Any]) -> Callable[P, R]: ...
    @overload
    def __get__(
        self, client: AwaitableApi, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, client: BrokerApi | None, owner: type[Any]) -> Any:
        return self if client is None else client._unary(self)


class Stream(_Row[Callable[P, "tuple[Message, float | None]"]], Generic[P, R]):
    """A row whose RPC answers with a stream; its builder also gives the call's deadline."""

    convert: Callable[[Any], R]

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(self, client: BlockingApi, owner: type[Any]) -> Callable[P, Iterator[R]]: ...
    @overload
    def __get__(self, client: AwaitableApi, owner: type[Any]) -> Callable[P, AsyncIterator[R]]: ...
    def __get__(self, client: BrokerApi | None, owner: type[Any]) -> Any:
        return self if client is None else client._stream(self)


def unary(
    rpc: str, convert: Callable[[Any], R], wait: Callable[[Any], float] | None = None
) -> Callable[[Callable[P, Message]], Unary[P, R]]:
    """Make the request builder below a row that sends `rpc` and converts its answer."""

    def row(build: Callable[P, Message]) -> Unary[P, R]:
        made: Unary[P, R] = Unary(rpc, build, convert)
        if wait is not None:
            made.wait = wait
        return made

    return row


def _step_up_wait(request: pb.GetTokenRequest) -> float:
    """A step-up may wait for the person's sign-in (the daemon's default bound)."""
    asks = request.acr_values or request.HasField("max_age_seconds")
    return STEP_UP_TIMEOUT_SECONDS if asks else 0.0


def stream(
    rpc: str, convert: Callable[[Any], R]
) -> Callable[[Callable[P, tuple[Message, float | None]]], Stream[P, R]]:
    """Make the request builder below a row that opens the stream `rpc`."""
    return lambda build: Stream(rpc, build, convert)


def _qr(response: pb.GetSignInQrResponse) -> tuple[str, bytes]:
    return response.media_type, response.image


def _app_and_answered(response: pb.SetAppPolicyResponse) -> tuple[App, int]:
    return App.from_proto(response.app), response.answered


def _logout_and_purge(response: pb.RemoveAccountResponse) -> tuple[str, int]:
    return response.logout_url, response.audit_purge_at_unix


_SIGN_IN_METHODS = {
    None: pb.SIGN_IN_METHOD_UNSPECIFIED,
    True: pb.SIGN_IN_METHOD_DEVICE_CODE,
    False: pb.SIGN_IN_METHOD_BROWSER,
}


class BrokerApi:
    """The methods of both clients, one row per RPC of the TokenBroker service.

    A subclass says how a row becomes a method (`_unary`, `_stream`).
    """

    @unary("GetToken", Token.from_proto, _step_up_wait)
    def get_token(
        account: str = "",
        *,
        scopes: Iterable[str] = (),
        min_ttl_seconds: int = 0,
        audience: str = "",
        id_token: bool = False,
        refused: bool = False,
        acr_values: str | Iterable[str] = "",
        max_age_seconds: int | None = None,
        app_hint: str = "",
    ) -> pb.GetTokenRequest:
        """An access token of `account` (default account when empty).

        `account` is an id, an alias, or the e-mail or login of one signed-in account.

        Fewer `scopes` than the sign-in's, or an `audience` (RFC 8707), give a
        down-scoped token, which the daemon keeps while it is valid. `id_token` asks
        for the account's ID token too: only an app the user allowed it gets it.
        `refused`: a server refused the last token (HTTP 401); the daemon renews it.
        `acr_values` (space-separated, or a list) and `max_age_seconds` ask for a
        step-up (RFC 9470): a token of a sign-in with one of these acr values, at most
        that old; the call waits while the person signs in (up to about 5 minutes
        more than the client's timeout), else BrokerError FAILED_PRECONDITION.
        `app_hint`: what this app says it is, kept in the audit as a hint when it calls
        through a forward (never identity: the daemon identifies callers itself).
        """
        if not isinstance(acr_values, str):
            acr_values = " ".join(acr_values)
        return pb.GetTokenRequest(
            account=account,
            scopes=list(scopes),
            min_ttl_seconds=min_ttl_seconds,
            audience=audience,
            id_token=id_token,
            refused=refused,
            acr_values=acr_values,
            max_age_seconds=max_age_seconds,
            app_hint=app_hint,
        )

    @unary("SignDpopProof", DpopProof.from_proto)
    def sign_dpop_proof(
        method: str,
        url: str,
        account: str = "",
        *,
        scopes: Iterable[str] = (),
        min_ttl_seconds: int = 0,
        audience: str = "",
        nonce: str = "",
        refused: bool = False,
        app_hint: str = "",
    ) -> pb.SignDpopProofRequest:
        """A token of `account` with a DPoP proof (RFC 9449) for one `method` `url` request.

        The token is the one get_token() gives for the same arguments; send the result's
        `headers`. `nonce`: what the server asked for in its DPoP-Nonce header. For a
        token that is not DPoP-bound the proof is "" and token_type "Bearer".
        `app_hint`: as get_token()'s.
        """
        return pb.SignDpopProofRequest(
            method=method,
            url=url,
            account=account,
            scopes=list(scopes),
            min_ttl_seconds=min_ttl_seconds,
            audience=audience,
            nonce=nonce,
            refused=refused,
            app_hint=app_hint,
        )

    @unary("GetStatus", Status.from_proto)
    def status() -> pb.GetStatusRequest:
        """The daemon's status and how it sees this process."""
        return pb.GetStatusRequest()

    @unary("ListAccounts", lambda response: [Account.from_proto(a) for a in response.accounts])
    def accounts() -> pb.ListAccountsRequest:
        """The signed-in accounts this app may use, default first."""
        return pb.ListAccountsRequest()

    @unary("BeginSignIn", SignInStart.from_proto)
    def begin_sign_in(
        *,
        workspace_id: str = "",
        device: bool | None = False,
        account: str = "",
        redirect_to: str = "",
        authorize_params: Mapping[str, str] | None = None,
        provider: str = "",
    ) -> pb.BeginSignInRequest:
        """Start a sign-in (within a workspace, if given); the user completes it at the URL.

        device=True: a device sign-in (RFC 8628): the user enters `user_code` at
        `verification_uri` on another device; `account` names the account it signs in
        again (the pending sign-in then belongs to it). None lets the daemon choose.
        redirect_to: the loopback page the browser lands on after a browser sign-in.
        authorize_params: extra authorize parameters of a browser sign-in, such as
        {"login_hint": "me@example.com", "prompt": "select_account"}.
        provider: the alias of the identity provider to sign in at (Status.providers);
        empty for the account's own, else the daemon's default one.
        """
        return pb.BeginSignInRequest(
            method=_SIGN_IN_METHODS[device],
            workspace_id=workspace_id,
            account=account,
            redirect_to=redirect_to,
            authorize_params=dict(authorize_params or {}),
            provider=provider,
        )

    @unary("GetSignInQr", _qr)
    def sign_in_qr(sign_in_id: str, *, png: bool = False) -> pb.GetSignInQrRequest:
        """The QR code of a pending device sign-in, for a TV to show: (media type, image)."""
        return pb.GetSignInQrRequest(
            sign_in_id=sign_in_id, format=pb.QR_FORMAT_PNG if png else pb.QR_FORMAT_SVG
        )

    @unary("SignOut", SignOutResult.from_proto)
    def sign_out(account: str = "") -> pb.SignOutRequest:
        """End the session of `account` (default account when empty)."""
        return pb.SignOutRequest(account=account)

    # -- the user's management of the broker (the bundled CLI uses these) ---------------

    @unary("ListApps", AppList.from_proto)
    def apps() -> pb.ListAppsRequest:
        """The apps that called the daemon or are in the policy, with their decisions."""
        return pb.ListAppsRequest()

    @unary("SetAppPolicy", _app_and_answered)
    def set_app_policy(
        app: str,
        decision: AppDecision,
        *,
        accounts: Iterable[str] = (),
        scopes: Iterable[str] = (),
        pin: bool = False,
        id_token: bool = False,
        once: bool = False,
        origins: Iterable[str] = (),
    ) -> pb.SetAppPolicyRequest:
        """Record the user's decision for an app; returns it and how many waiting calls it answered.

        AppDecision.UNSPECIFIED removes the app's entry so the default applies again.
        `id_token` (with ALLOW) lets the app have the account's ID token as well.
        `once` (ALLOW or DENY) answers only the requests waiting now and records nothing.
        `origins`: the web origins a browser extension (`browser:<browser>/<id>`) may get
        tokens for.
        """
        return pb.SetAppPolicyRequest(
            app=app,
            decision=pb.AppDecision.Value(f"APP_DECISION_{decision.name}"),
            accounts=list(accounts),
            scopes=list(scopes),
            pin=pin,
            id_token=id_token,
            once=once,
            origins=list(origins),
        )

    @unary("SetDefaultAccount", lambda response: Account.from_proto(response.account))
    def set_default_account(account: str) -> pb.SetDefaultAccountRequest:
        """Make `account` the one used when a request names none."""
        return pb.SetDefaultAccountRequest(account=account)

    @unary("RemoveAccount", _logout_and_purge)
    def remove_account(account: str) -> pb.RemoveAccountRequest:
        """Sign out and delete all the daemon keeps of `account`.

        Returns the provider's logout URL and when the account's audit rows are purged.
        """
        return pb.RemoveAccountRequest(account=account)

    @unary("SetAccountAlias", lambda response: response.account)
    def set_account_alias(
        alias: str, account: str, *, force: bool = False
    ) -> pb.SetAccountAliasRequest:
        """Let `alias` name `account` wherever an account is named; an empty `account` removes it.

        Returns the id of the account the alias names (or named, when removed). An alias
        that is another signed-in account's login would hide it: FAILED_PRECONDITION,
        unless `force`.
        """
        return pb.SetAccountAliasRequest(alias=alias, account=account, force=force)

    @unary("ListAuditEvents", lambda response: [AuditEvent.from_proto(e) for e in response.events])
    def audit_events(
        *, account: str = "", app: str = "", limit: int = 100, before_id: int = 0
    ) -> pb.ListAuditEventsRequest:
        """Recent audit rows of the accounts this app may see, newest first."""
        return pb.ListAuditEventsRequest(account=account, app=app, limit=limit, before_id=before_id)

    @unary("OpenForward", lambda response: Forward.from_proto(response.forward))
    def open_forward(
        name: str,
        *,
        ttl_seconds: int,
        accounts: Iterable[str] = (),
        all_accounts: bool = False,
        scopes: Iterable[str] = (),
        audience: str = "",
        id_token: bool = False,
        confirm: bool = False,
        socket_path: str = "",
    ) -> pb.OpenForwardRequest:
        """Open a forward: a socket whose every connection gets only the tokens it allows.

        `accounts` (none: the default account now; `all_accounts` for every one),
        `scopes` (tokens down-scoped to them), `audience`, `id_token` and `confirm`
        (each new connection's first request waits for the person's answer) are its
        policy; it closes itself after `ttl_seconds`. `socket_path`: where its socket
        goes (an absolute path in a folder of yours); empty for the runtime folder.
        """
        return pb.OpenForwardRequest(
            name=name,
            ttl_seconds=ttl_seconds,
            accounts=list(accounts),
            all_accounts=all_accounts,
            scopes=list(scopes),
            audience=audience,
            id_token=id_token,
            confirm=confirm,
            socket_path=socket_path,
        )

    @unary("CloseForward", lambda response: Forward.from_proto(response.forward))
    def close_forward(name: str) -> pb.CloseForwardRequest:
        """Close a forward: its socket goes and its connections are refused at once."""
        return pb.CloseForwardRequest(name=name)

    @unary("ListForwards", lambda response: [Forward.from_proto(f) for f in response.forwards])
    def forwards() -> pb.ListForwardsRequest:
        """The open forwards, with their use."""
        return pb.ListForwardsRequest()

    @stream("WatchEvents", Event.from_proto)
    def watch_events(*, timeout: float | None = None) -> tuple[pb.WatchEventsRequest, float | None]:
        """Session events as they happen, starting with a SNAPSHOT.

        Runs until the client closes, or for `timeout` seconds (then BrokerError
        DEADLINE_EXCEEDED).
        """
        return pb.WatchEventsRequest(), timeout

    def _unary(self, row: Unary[P, R]) -> Callable[P, Any]:
        """The client's method for a row whose RPC answers once."""
        raise NotImplementedError

    def _stream(self, row: Stream[P, R]) -> Callable[P, Any]:
        """The client's method for a row whose RPC answers with a stream."""
        raise NotImplementedError


class BlockingApi(BrokerApi):
    """The rows as methods that block until answered (BrokerClient)."""


class AwaitableApi(BrokerApi):
    """The rows as coroutines and async iterators (AsyncBrokerClient)."""
