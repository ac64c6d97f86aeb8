"""Who may call each RPC: every method of the proto and of the stock services beside it,
called as each class of caller, on both paths.

The daemon's access table (daemon/api/access.py) is applied by the transport, never by
the handlers: here a real checked server on a Unix socket serves stand-in handlers that
record being reached, and stand-ins for the stock services (health, reflection) at
their paths; the real app gate decides on a real policy file, and a gRPC client and an
HTTP/1.1 JSON client call every RPC of broker.proto (gRPC alone the stock services') as
each kind of caller. EXPECTED below is written out on its own, not derived from the
table: weaken one entry and the test names the RPC and the caller that got through.
(Another user's connection is closed at accept: tests/attacks/test_identity_other_uid.py.)
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.wrappers_pb2 import StringValue
from grpclib.client import Channel, StreamStreamMethod, UnaryStreamMethod, UnaryUnaryMethod
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError

import signin_broker.daemon
from signin_broker.daemon.api.access import ACCESS, guards
from signin_broker.daemon.api.dispatch import ServiceHandlers, StockService
from signin_broker.daemon.api.json_calls import JsonCalls
from signin_broker.daemon.api.transport import CheckedServer, ConnectionTable, TransportGate
from signin_broker.daemon.apps.gate import AppGate
from signin_broker.daemon.apps.policy import AppRule, Decision, PolicyFile, render
from signin_broker.daemon.callers.forwarded import ForwardConnection, ForwardGrant
from signin_broker.daemon.callers.identity import Caller
from signin_broker.identities import AppId, AppKind
from signin_broker.v1 import broker_pb2 as pb
from support.stand_ins import StandIns

SERVICE = pb.DESCRIPTOR.services_by_name["TokenBroker"]
UID, GID = os.getuid(), os.getgid()
ORIGIN = "https://app.example"
EXTENSION = AppId(AppKind.BROWSER, "chromium/abcdefghijklmnopabcdefghijklmnop")
FLATPAK = AppId(AppKind.FLATPAK, "org.example.X")
FORWARD = AppId(AppKind.FORWARD, "box")
THROUGH_BOX = ForwardConnection(ForwardGrant("box", None))

OK, NO, ASKS = "served", "refused", "asks the person, then served"

# The callers, as the kernel and the policy file (below) describe them; the daemon's
# default for apps without a rule of their own is "ask".
CALLERS: dict[str, Caller] = {
    "unidentified": Caller(UID, GID, 4001, "", 1),  # it exited before it could be read
    "denied app": Caller(UID, GID, 4002, "/usr/bin/denied", 2),
    "undecided app": Caller(UID, GID, 4003, "/app/bin/x", 3, sandbox=FLATPAK),
    "restricted app": Caller(UID, GID, 4004, "/usr/bin/restricted", 4),
    "allowed app": Caller(UID, GID, 4005, "/usr/bin/allowed", 5),
    "managing app": Caller(UID, GID, 4006, "/usr/bin/signin-broker", 6),  # no rule: the CLI
    "browser extension": Caller(UID, GID, 4007, "/usr/bin/python3", 7, sandbox=EXTENSION),
    "forward": Caller(UID, GID, 4008, "/usr/bin/ssh", 8, sandbox=FORWARD, forward=THROUGH_BOX),
}
RULES = [
    AppRule("/usr/bin/denied", Decision.DENY),
    AppRule("/usr/bin/restricted", Decision.ALLOW, accounts=("user:1",)),
    AppRule("/usr/bin/allowed", Decision.ALLOW),
    AppRule(str(EXTENSION), Decision.ALLOW, origins=(ORIGIN,)),
]

# What each caller gets of each RPC, in the order of CALLERS:
#   unidentified, denied, undecided, restricted, allowed, managing, browser, forward
TOKENS = (NO, NO, ASKS, OK, OK, ASKS, OK, OK)
READS = (NO, NO, OK, OK, OK, OK, NO, NO)  # undecided and unruled apps read, seeing nothing
SESSIONS = (NO, NO, ASKS, OK, OK, ASKS, NO, NO)
MANAGES = (NO, NO, NO, NO, OK, OK, NO, NO)
EXPECTED: dict[str, tuple[str, ...]] = {
    "GetToken": TOKENS,
    "SignDpopProof": TOKENS,
    "GetStatus": (OK, OK, OK, OK, OK, OK, NO, OK),
    "ListAccounts": READS,
    "GetSignInQr": READS,
    "WatchEvents": READS,
    "ListAuditEvents": READS,
    "BeginSignIn": SESSIONS,
    "SignOut": SESSIONS,
    "SetDefaultAccount": SESSIONS,
    "RemoveAccount": SESSIONS,
    "ListApps": MANAGES,
    "SetAppPolicy": MANAGES,
    "SetAccountAlias": MANAGES,
    "OpenForward": MANAGES,
    "CloseForward": MANAGES,
    "ListForwards": MANAGES,
    # The stock services: any app not denied (nobody is asked), never a forward or a browser.
    "grpc.health.v1.Health/Check": READS,
    "grpc.health.v1.Health/Watch": READS,
    "grpc.reflection.v1.ServerReflection/ServerReflectionInfo": READS,
    "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": READS,
}
# The stock services' RPCs, as grpclib's Health and ServerReflection serve them (their
# own messages would clash in this process with grpcio's, which tests/integration use).
STOCK = {
    "/grpc.health.v1.Health/Check": Cardinality.UNARY_UNARY,
    "/grpc.health.v1.Health/Watch": Cardinality.UNARY_STREAM,
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": Cardinality.STREAM_STREAM,
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": Cardinality.STREAM_STREAM,
}


class StockStandIns:
    """The stock services' RPCs, each answering its first request with it."""

    def __mapping__(self) -> dict[str, Handler]:
        return {
            path: Handler(self._echo, cardinality, StringValue, StringValue)
            for path, cardinality in STOCK.items()
        }

    async def _echo(self, stream: Any) -> None:
        await stream.send_message(await stream.recv_message())


def test_every_rpc_served_has_an_expectation_and_an_access_entry() -> None:
    served = [*SERVICE.methods_by_name, *(path.lstrip("/") for path in STOCK)]
    assert sorted(EXPECTED) == sorted(served) == sorted(ACCESS)


@pytest.fixture
def folder() -> Iterator[Path]:
    made = Path(tempfile.mkdtemp(prefix="sb-access-", dir="/tmp"))  # a socket path is short
    yield made
    shutil.rmtree(made, ignore_errors=True)


@pytest.mark.parametrize("who", list(CALLERS))
def test_each_caller_gets_what_the_table_says_of_every_rpc_on_both_paths(
    folder: Path, who: str
) -> None:
    caller = CALLERS[who]
    policy = folder / "apps.toml"
    policy.write_text(render(RULES))
    gate = AppGate(PolicyFile(policy), Decision.ASK, ask_timeout=30)
    stand_ins = StandIns()
    ready = asyncio.Event()
    ready.set()
    handlers = ServiceHandlers([stand_ins], SERVICE, apps=gate, ready=ready)
    if caller.forward is not None:  # as Forwards serves them
        handlers = handlers.replacing({"GetStatus": stand_ins.GetStatus})
    socket_path = folder / "s"

    async def scenario() -> dict[str, list[str]]:
        gate_of_connections = TransportGate(
            frozenset({UID}), ConnectionTable(), lambda s, n: caller
        )
        stock = StockService(StockStandIns(), gate)
        json_calls = JsonCalls(handlers.unary)
        server = CheckedServer([handlers, stock], gate_of_connections, json_calls)
        await server.start(path=str(socket_path))
        try:
            got: dict[str, list[str]] = {}
            for method in SERVICE.methods:
                paths = [_grpc] if method.server_streaming else [_grpc, _json]  # streams: gRPC
                got[method.name] = [
                    await _outcome(gate, stand_ins, caller, method, partial(call, socket_path))
                    for call in paths
                ]
            for path in STOCK:
                got[path.lstrip("/")] = [await _stock_outcome(socket_path, path)]
            return got
        finally:
            server.close()
            await server.wait_closed()

    got = asyncio.run(scenario())
    column = list(CALLERS).index(who)
    wrong = {
        name: f"expected {EXPECTED[name][column]}, got {outcomes}"
        for name, outcomes in got.items()
        if set(outcomes) != {EXPECTED[name][column]}
    }
    assert wrong == {}, f"as the {who}"


async def _outcome(
    gate: AppGate, stand_ins: StandIns, caller: Caller, method: MethodDescriptor, call: Any
) -> str:
    """OK, ASKS or NO: how one call of the method went, and that the handler saw it so."""
    reached = len(stand_ins.reached)
    request = message_factory.GetMessageClass(method.input_type)()
    if caller.browser and "origin" in request.DESCRIPTOR.fields_by_name:
        request.origin = ORIGIN  # the web origin a browser extension vouches for
    pending = asyncio.ensure_future(call(method, request))
    asked = await _asked(gate, caller, pending)
    if asked:
        gate.answer_once(caller.app, Decision.ALLOW)
    status = await asyncio.wait_for(pending, 10)
    served = stand_ins.reached[reached:]
    if status is Status.OK:
        assert [(name, admitted.caller) for name, admitted in served] == [(method.name, caller)]
        return ASKS if asked else OK
    assert status is Status.PERMISSION_DENIED, (method.name, status)
    assert not served, f"{method.name}'s handler ran for a refused caller"
    return NO


async def _asked(gate: AppGate, caller: Caller, pending: asyncio.Future[Status]) -> bool:
    """Whether the call waits for the person's answer (else it ends by itself)."""
    for _ in range(200):  # bounded: a refusal or an answer takes milliseconds here
        if pending.done():
            return False
        if any(view.waiting and view.record.id == caller.app for view in gate.apps()):
            return True
        await asyncio.sleep(0.01)
    raise AssertionError("the call neither ended nor asked")


async def _grpc(socket_path: Path, method: MethodDescriptor, request: Any) -> Status:
    path = f"/{SERVICE.full_name}/{method.name}"
    response = message_factory.GetMessageClass(method.output_type)
    kind = UnaryStreamMethod if method.server_streaming else UnaryUnaryMethod
    channel = Channel(path=str(socket_path))
    try:
        await kind(channel, path, type(request), response)(request)
    except GRPCError as error:
        return error.status
    finally:
        channel.close()
    return Status.OK


async def _stock_outcome(socket_path: Path, path: str) -> str:
    """OK or NO: a stock RPC's answer, or its refusal (never asked: none waits)."""
    channel = Channel(path=str(socket_path))
    try:
        async with StreamStreamMethod(channel, path, StringValue, StringValue).open() as stream:
            await stream.send_message(StringValue(value="hello"), end=True)
            answer = await asyncio.wait_for(stream.recv_message(), 10)
            assert answer == StringValue(value="hello")
            await stream.recv_trailing_metadata()
    except GRPCError as error:
        assert error.status is Status.PERMISSION_DENIED, (path, error.status)
        return NO
    finally:
        channel.close()
    return OK


async def _json(socket_path: Path, method: MethodDescriptor, request: Any) -> Status:
    body = json_format.MessageToJson(request).encode()
    reader, writer = await asyncio.open_unix_connection(socket_path)
    try:
        writer.write(
            f"POST /{SERVICE.full_name}/{method.name} HTTP/1.1\r\nHost: broker\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status = int((await reader.readline()).split()[1])
        while (await reader.readline()).strip():
            pass
        answer = await reader.read(65536)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    if status == 200:
        return Status.OK
    return Status[json.loads(answer)["code"].upper()]


@pytest.mark.parametrize("unlisted", ["ListApps", "WatchEvents"])
def test_an_rpc_without_an_entry_stops_the_daemon_at_start(folder: Path, unlisted: str) -> None:
    gate = AppGate(PolicyFile(folder / "apps.toml"), Decision.ASK, ask_timeout=30)
    table = {name: entry for name, entry in ACCESS.items() if name != unlisted}
    with pytest.raises(TypeError, match=f"no access entry for {unlisted}"):
        ServiceHandlers([StandIns()], SERVICE, apps=gate, ready=asyncio.Event(), access=table)
    stale = {**ACCESS, "GetTokens": ACCESS["GetToken"]}  # a renamed RPC's entry left behind
    with pytest.raises(TypeError, match="access entries for no RPC of the service: GetTokens"):
        ServiceHandlers([StandIns()], SERVICE, apps=gate, ready=asyncio.Event(), access=stale)


@pytest.mark.parametrize("who", ["forward", "browser extension"])
def test_a_guard_refuses_the_kinds_its_entry_leaves_out_whoever_asks_it(
    folder: Path, who: str
) -> None:
    """Not only the transports' early refusal: the guard's admission refuses them too.

    The app gate behind it no longer says "tokens only" again; a gate that allows
    every app would let a forward manage the broker if anything reached it unguarded.
    """
    caller = CALLERS[who]
    policy = folder / "apps.toml"
    policy.write_text(render(RULES))
    gate = AppGate(PolicyFile(policy), Decision.ALLOW, ask_timeout=1)
    paths = [f"/{SERVICE.full_name}/{name}" for name in SERVICE.methods_by_name] + list(STOCK)

    every = guards(paths[: -len(STOCK)], gate) | guards(list(STOCK), gate)

    async def admitted(path: str) -> str:
        guard = every[path]
        method = SERVICE.methods_by_name.get(path.rpartition("/")[2])
        request = message_factory.GetMessageClass(method.input_type)() if method else None
        if request is not None and "origin" in request.DESCRIPTOR.fields_by_name:
            request.origin = ORIGIN
        try:
            await guard.admit(caller, request)
        except GRPCError as error:
            assert error.status is Status.PERMISSION_DENIED
            return NO
        return OK

    got = {path.lstrip("/").removeprefix(f"{SERVICE.full_name}/"): path for path in paths}
    column = list(CALLERS).index(who)
    for name, path in got.items():
        if EXPECTED[name][column] == NO:
            assert asyncio.run(admitted(path)) == NO, name


# Who the caller is, by kind: read by access.py and account_access.py alone.
CALLER_KINDS = {"forward", "browser", "identified", "sandbox"}
ADMISSIONS = {"visible_to", "admit_reader", "admit_app", "admit_manager"}
DAEMON = Path(signin_broker.daemon.__file__).parent
ACCESS_RULES = {"api/access.py", "api/account_access.py"}


def _modules() -> dict[str, ast.Module]:
    return {
        path.relative_to(DAEMON).as_posix(): ast.parse(path.read_text())
        for path in sorted(DAEMON.rglob("*.py"))
    }


def _handler_modules() -> dict[str, ast.Module]:
    """The daemon's modules that hold a handler of an RPC (a method named as the RPC)."""
    return {
        name: tree
        for name, tree in _modules().items()
        if any(
            isinstance(node, ast.AsyncFunctionDef) and node.name in SERVICE.methods_by_name
            for node in ast.walk(tree)
        )
    }


def _caller_rules(tree: ast.Module) -> list[int]:
    """Lines that decide by the caller's kind or reach past the call's own rules."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in CALLER_KINDS | ADMISSIONS:
            found.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "sees":
            if not (isinstance(node.value, ast.Name) and node.value.id == "admitted"):
                found.append(node.lineno)  # an entitlement asked by hand
        elif isinstance(node, ast.Attribute) and node.attr == "accounts":
            owner = node.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "entitlement") or (
                isinstance(owner, ast.Name) and owner.id in ("entitlement", "visible")
            ):
                found.append(node.lineno)  # "limited to some accounts", asked by hand
    return found


def test_no_handler_decides_by_the_kind_of_its_caller() -> None:
    """The grep: no handler reads what kind of caller it serves, nor asks a policy itself."""
    handlers = _handler_modules()
    assert {"api/servicer.py", "api/account_calls.py", "api/manager_calls.py"} <= set(handlers)
    found = {name: lines for name, tree in handlers.items() if (lines := _caller_rules(tree))}
    assert found == {}, "ask the call as admitted (daemon/api/account_access.py)"


def test_only_the_table_and_its_object_level_half_refuse_a_caller_for_its_kind() -> None:
    """Nowhere in the daemon but access.py and account_access.py does an `if` on a caller's
    kind (a forward, a browser extension) raise."""
    refusing = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.If):
                continue
            kinds = {n.attr for n in ast.walk(node.test) if isinstance(n, ast.Attribute)}
            raises = any(isinstance(n, ast.Raise) for s in node.body for n in ast.walk(s))
            if kinds & {"forward", "browser"} and raises:
                refusing.append(f"{name}:{node.lineno}")
    assert refusing
    assert {place.partition(":")[0] for place in refusing} <= ACCESS_RULES, refusing
