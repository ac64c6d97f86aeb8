"""Who may call each RPC of the API: one table, applied by the transport before any handler runs.

Every RPC the daemon serves has one entry in ACCESS: the broker's own by their names,
the stock services beside it (health, reflection) by their full names. An entry says
which of the user's apps may call the RPC, by what their app policy says of them
(Callers), and whether a forward or a browser extension may too. The dispatch
(dispatch.py) applies an RPC's entry to each of its calls, over gRPC and JSON alike: a
caller of a class the entry leaves out (a forward, a browser extension) is refused
before a byte of its request is read; the app policy is asked once the broker's
request is read (a browser extension's request names the web origin it is for), and
before a stock service's is, before the handler runs. The handler is given the call
as admitted (account_access.Admitted: what the policy lets the caller see and use, and
the rules for the accounts a call names, this table's object-level half) and never
decides who may call it. An RPC without an entry, or an entry without an RPC, stops
the daemon at its start.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ...session.validation import check_origin
from ..apps.gate import AppGate
from ..callers.identity import Caller
from .account_access import Admitted
from .statuses import InvalidRequest, checked


class Callers(enum.Enum):
    """Which of the user's apps may call an RPC, by what their app policy says of them."""

    # Any caller of the user, identified or not: each sees only what its policy lets
    # it see (nothing until it is allowed).
    ANYONE = "any caller"
    # An app its policy does not deny: one whose rule says ask reads nothing yet.
    READERS = "an app not denied"
    # An app its policy allows: a request of one whose rule says ask waits for the person.
    ALLOWED = "an app allowed"
    # The person's own tools: an unconfined program without a rule of its own, or an app
    # allowed every account and scope (apps.gate.AppGate.admit_manager).
    MANAGERS = "the managing app"


@dataclass(frozen=True, slots=True)
class Access:
    """One RPC's entry: the apps that may call it, and whether forwards and browsers may too."""

    callers: Callers
    forwards: bool = False  # served on a forward's socket, as the forward's grant allows
    browsers: bool = False  # served to a browser extension, for the origins its rule lists

    def __str__(self) -> str:
        also = [("forwards", self.forwards), ("browser extensions", self.browsers)]
        return " and ".join([self.callers.value, *(kind for kind, served in also if served)])


# Tokens and proofs for them: every app the policy allows, a forward as its grant
# allows, a browser extension for the web origins its rule lists.
TOKENS = Access(Callers.ALLOWED, forwards=True, browsers=True)

ACCESS: Mapping[str, Access] = MappingProxyType(
    {
        "GetToken": TOKENS,
        "SignDpopProof": TOKENS,
        # The daemon's state: any caller, seeing only the accounts its policy lets it see.
        # A forward answers its own, reduced one (forward_calls.ForwardCalls.reduced_status).
        "GetStatus": Access(Callers.ANYONE, forwards=True),
        # What apps read: the accounts, a device sign-in's code, events, the audit trail.
        "ListAccounts": Access(Callers.READERS),
        "GetSignInQr": Access(Callers.READERS),
        "WatchEvents": Access(Callers.READERS),
        "ListAuditEvents": Access(Callers.READERS),
        # Sessions begun, ended and chosen, of the accounts the app may use.
        "BeginSignIn": Access(Callers.ALLOWED),
        "SignOut": Access(Callers.ALLOWED),
        "SetDefaultAccount": Access(Callers.ALLOWED),
        "RemoveAccount": Access(Callers.ALLOWED),
        # The person's own: the app policy, the aliases, the forwards.
        "ListApps": Access(Callers.MANAGERS),
        "SetAppPolicy": Access(Callers.MANAGERS),
        "SetAccountAlias": Access(Callers.MANAGERS),
        "OpenForward": Access(Callers.MANAGERS),
        "CloseForward": Access(Callers.MANAGERS),
        "ListForwards": Access(Callers.MANAGERS),
        # The stock services, by their full names: any app not denied, refused before
        # its request is read. A forward serves none of them.
        "grpc.health.v1.Health/Check": Access(Callers.READERS),
        "grpc.health.v1.Health/Watch": Access(Callers.READERS),
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo": Access(Callers.READERS),
        "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": Access(Callers.READERS),
    }
)
BROKER = "signin_broker.v1.TokenBroker"  # the service whose RPCs the table names alone


def entry_name(path: str) -> str:
    """The name of an RPC's entry: the method's for the broker's, `service/method` for others."""
    service, _, method = path.lstrip("/").partition("/")
    return method if service == BROKER else f"{service}/{method}"


class Guard:
    """One RPC's entry, applied to each of its calls with the user's app policy.

    The only place where a caller is refused for its kind (a forward, a browser
    extension); then the app gate (apps/gate.py) decides by the user's policy, asked by
    the guards alone.
    """

    def __init__(self, rpc: str, access: Access, apps: AppGate) -> None:
        self.rpc = rpc
        self.access = access
        self._apps = apps
        self._visibility = apps.visible_to
        checks: dict[Callers, Callable[[Caller, Any], Awaitable[Admitted]]] = {
            Callers.ANYONE: self._anyone,
            Callers.READERS: self._reader,
            Callers.ALLOWED: self._allowed,
            Callers.MANAGERS: self._manager,
        }
        self._check = checks[access.callers]  # bound once: GetToken's hot path looks up nothing

    async def admit(self, caller: Caller, request: Any) -> Admitted:
        """The call admitted: refused for the caller's kind, then by its app policy.

        The transports ask refusal() already, before they read the request; it is asked
        again here, so that no call reaches the app gate but through it.
        """
        refused = self.refusal(caller)
        if refused is not None:
            raise refused
        return await self._check(caller, request)

    def refusal(self, caller: Caller) -> GRPCError | None:
        """The refusal of a caller of a kind the entry leaves out (read before the request is)."""
        if caller.forward is not None and not self.access.forwards:
            return GRPCError(
                Status.PERMISSION_DENIED,
                f"{self.rpc} is not available through a forward: a forward gives tokens only;"
                " run it on the host",
            )
        if caller.browser and not self.access.browsers:
            return GRPCError(Status.PERMISSION_DENIED, f"{caller.app} may get tokens only")
        return None

    async def _anyone(self, caller: Caller, request: Any) -> Admitted:
        return Admitted(caller, await self._visibility(caller), self._visibility)

    async def _reader(self, caller: Caller, request: Any) -> Admitted:
        return Admitted(caller, await self._apps.admit_reader(caller), self._visibility)

    async def _allowed(self, caller: Caller, request: Any) -> Admitted:
        origin = web_origin_of(request, caller) if self.access.browsers else None
        entitlement = await self._apps.admit_app(caller, origin)
        return Admitted(caller, entitlement, self._visibility, origin)

    async def _manager(self, caller: Caller, request: Any) -> Admitted:
        return Admitted(caller, await self._apps.admit_manager(caller), self._visibility)


def web_origin_of(request: Any, caller: Caller) -> str | None:
    """The web origin a browser extension's token request is for; None for any other app's.

    A caller without an identity is refused for that (AppGate.admit_app), whatever it sent.
    """
    if not caller.browser:
        if request.origin and caller.identified:
            raise InvalidRequest(
                "origin is for a browser extension's requests (through signin-broker native-host)"
            )
        return None
    if not request.origin:
        raise InvalidRequest("a browser extension's request must name the web origin it is for")
    origin: str = checked(check_origin, request.origin)
    return origin


def guards(
    paths: Iterable[str], apps: AppGate, table: Mapping[str, Access] = ACCESS
) -> dict[str, Guard]:
    """The guard of each of a service's RPCs, by path; TypeError for one without an entry.

    The daemon does not start then. An entry naming no RPC of the service is one too: a
    renamed RPC must not leave its old entry behind while the new name has none.
    """
    names = {path: entry_name(path) for path in paths}
    unlisted = sorted(set(names.values()) - set(table))
    if unlisted:
        raise TypeError(f"no access entry for {', '.join(unlisted)} (daemon/api/access.py)")
    served = set(names.values())
    services = {_service_of(name) for name in served}
    stale = sorted(name for name in table if _service_of(name) in services and name not in served)
    if stale:
        raise TypeError(f"access entries for no RPC of the service: {', '.join(stale)}")
    return {path: Guard(name, table[name], apps) for path, name in names.items()}


def _service_of(name: str) -> str:
    service, slash, _ = name.rpartition("/")
    return service if slash else BROKER
