"""BrokerClient and AsyncBrokerClient offer the same methods, built from one table of RPCs.

The clients talk to a fake stub here (no daemon): each method must send the same request
and give the same result from both clients, and map errors the same way.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from signin_broker.client import (
    AppDecision,
    AsyncBrokerClient,
    BrokerClient,
    BrokerError,
    NotSignedIn,
    _api,
)
from signin_broker.v1 import broker_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["TokenBroker"]

# Arguments for one call of each method; every row needs one (a new row fails below).
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "get_token": (("user:1",), {"scopes": ["openid"], "min_ttl_seconds": 60, "audience": "a"}),
    "status": ((), {}),
    "accounts": ((), {}),
    "begin_sign_in": (
        (),
        {"device": True, "account": "work/user:1", "provider": "work", "workspace_id": "7"},
    ),
    "sign_in_qr": (("s1",), {"png": True}),
    "sign_out": (("user:1",), {}),
    "apps": ((), {}),
    "set_app_policy": (("app", AppDecision.ALLOW), {"accounts": ["user:1"], "pin": True}),
    "set_default_account": (("user:1",), {}),
    "remove_account": (("user:1",), {}),
    "set_account_alias": (("work", "alice@example.com"), {}),
    "audit_events": ((), {"account": "user:1", "limit": 5}),
    "watch_events": ((), {"timeout": 3.0}),
    "sign_dpop_proof": (("GET", "https://api.example/me", "user:1"), {"nonce": "n"}),
    "open_forward": (("ci",), {"ttl_seconds": 60, "scopes": ["read"], "confirm": True}),
    "close_forward": (("ci",), {}),
    "forwards": ((), {}),
}


def surface(cls: type) -> dict[str, inspect.Signature]:
    """The public methods of a client class and their signatures."""
    return {
        name: inspect.signature(getattr(cls, name))
        for name in dir(cls)
        if not name.startswith("_") and callable(getattr(cls, name))
    }


def test_both_clients_have_the_same_methods_with_the_same_signatures() -> None:
    sync, aio = surface(BrokerClient), surface(AsyncBrokerClient)
    assert sorted(sync) == sorted(aio)
    assert {name: str(sig) for name, sig in sync.items()} == {
        name: str(sig) for name, sig in aio.items()
    }
    assert inspect.signature(BrokerClient) == inspect.signature(AsyncBrokerClient)
    assert set(CALLS) <= set(sync)


def test_the_comparison_sees_a_method_one_client_lacks_or_shapes_differently() -> None:
    class Extra(BrokerClient):
        def refresh_all(self) -> None:
            """Only here."""

    class Reshaped(BrokerClient):
        def status(self, verbose: bool = False) -> Any:
            """Another signature."""

    assert set(surface(Extra)) - set(surface(AsyncBrokerClient)) == {"refresh_all"}
    assert surface(Reshaped)["status"] != surface(AsyncBrokerClient)["status"]


def test_async_methods_are_awaited_where_sync_ones_return() -> None:
    sync = BrokerClient("/nonexistent/broker.sock")

    async def kinds() -> dict[str, str]:
        aio = AsyncBrokerClient("/nonexistent/broker.sock")
        try:
            return {name: kind(getattr(aio, name)) for name in surface(AsyncBrokerClient)}
        finally:
            await aio.close()

    try:
        expected = {
            name: {"function": "coroutine", "generator": "async generator"}[
                kind(getattr(sync, name))
            ]
            for name in surface(BrokerClient)
        }
    finally:
        sync.close()
    assert asyncio.run(kinds()) == expected


def kind(method: Callable[..., Any]) -> str:
    if inspect.isasyncgenfunction(method):
        return "async generator"
    if inspect.iscoroutinefunction(method):
        return "coroutine"
    return "generator" if inspect.isgeneratorfunction(method) else "function"


def rows() -> dict[str, _api.Unary[..., Any] | _api.Stream[..., Any]]:
    return {
        name: row
        for name, row in vars(_api.BrokerApi).items()
        if isinstance(row, _api.Unary | _api.Stream)
    }


def test_every_rpc_of_the_service_is_one_row_sending_its_request_type() -> None:
    table = rows()
    assert sorted(row.rpc for row in table.values()) == sorted(SERVICE.methods_by_name)
    for name, row in table.items():
        rpc = SERVICE.methods_by_name[row.rpc]
        assert isinstance(row, _api.Stream) == rpc.server_streaming, name
        built = typing.get_type_hints(row.build, vars(_api))["return"]
        if isinstance(row, _api.Stream):
            built = typing.get_args(built)[0]
        assert built.DESCRIPTOR is rpc.input_type, name
    assert sorted(CALLS) == sorted(table)


class RpcFailure(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def answer(rpc: str) -> Any:
    """A response with something in every field, so conversions have work to do."""
    output = SERVICE.methods_by_name[rpc].output_type
    response = pb.__dict__[output.name]()
    for field in output.fields:
        if field.message_type is not None and not field.message_type.GetOptions().map_entry:
            nested = getattr(response, field.name)
            nested = nested.add() if field.is_repeated else nested
            nested.SetInParent()
            for inner in field.message_type.fields:
                if inner.type == inner.TYPE_STRING and not inner.is_repeated:
                    setattr(nested, inner.name, f"{field.name}.{inner.name}")
        elif field.type == field.TYPE_STRING and not field.is_repeated:
            setattr(response, field.name, f"the {field.name}")
        elif field.type == field.TYPE_BYTES:
            setattr(response, field.name, b"\x89PNG")
        elif field.type in (field.TYPE_INT64, field.TYPE_INT32) and not field.is_repeated:
            setattr(response, field.name, 42)
        elif field.type == field.TYPE_ENUM:
            setattr(response, field.name, 1)
        elif field.type == field.TYPE_BOOL:
            setattr(response, field.name, True)
    return response


class FakeStub:
    """Answers every RPC from answer(), or fails with `failure`; records what it was sent."""

    def __init__(self, awaited: bool, failure: grpc.RpcError | None = None) -> None:
        self.awaited, self.failure = awaited, failure
        self.sent: list[tuple[str, Any, float | None]] = []

    def __getattr__(self, rpc: str) -> Callable[..., Any]:
        streaming = SERVICE.methods_by_name[rpc].server_streaming

        def call(request: Any, timeout: float | None) -> Any:
            self.sent.append((rpc, request, timeout))
            if streaming:
                return self._messages(rpc) if self.awaited else self._blocking_messages(rpc)
            return self._answer(rpc) if self.awaited else self._blocking_answer(rpc)

        return call

    def _blocking_answer(self, rpc: str) -> Any:
        if self.failure:
            raise self.failure
        return answer(rpc)

    async def _answer(self, rpc: str) -> Any:
        return self._blocking_answer(rpc)

    def _blocking_messages(self, rpc: str) -> Iterator[Any]:
        yield answer(rpc)
        yield self._blocking_answer(rpc)

    async def _messages(self, rpc: str) -> AsyncIterator[Any]:
        for message in self._blocking_messages(rpc):
            yield message


def call_sync(name: str, stub: FakeStub) -> Any:
    client = BrokerClient("/nonexistent/broker.sock", timeout=7)
    client._stub = stub
    try:
        args, kwargs = CALLS[name]
        result = getattr(client, name)(*args, **kwargs)
        return list(result) if isinstance(result, Iterator) else result
    finally:
        client.close()


def call_async(name: str, stub: FakeStub) -> Any:
    async def scenario() -> Any:
        async with AsyncBrokerClient("/nonexistent/broker.sock", timeout=7) as client:
            client._stub = stub
            args, kwargs = CALLS[name]
            result = getattr(client, name)(*args, **kwargs)
            if isinstance(result, AsyncIterator):
                return [message async for message in result]
            return await result

    return asyncio.run(scenario())


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_method_sends_the_same_request_and_gives_the_same_result_on_both(name: str) -> None:
    sync_stub, async_stub = FakeStub(awaited=False), FakeStub(awaited=True)
    sync_result = call_sync(name, sync_stub)
    assert call_async(name, async_stub) == sync_result
    assert sync_stub.sent == async_stub.sent
    ((rpc, _, timeout),) = sync_stub.sent
    assert rpc == rows()[name].rpc
    assert timeout == (3.0 if rpc == "WatchEvents" else 7)
    assert sync_result not in (None, [], ())


def test_arguments_reach_the_request() -> None:
    stub = FakeStub(awaited=False)
    call_sync("begin_sign_in", stub)
    call_sync("set_app_policy", stub)
    (_, sign_in, _), (_, policy, _) = stub.sent
    assert sign_in == pb.BeginSignInRequest(
        method=pb.SIGN_IN_METHOD_DEVICE_CODE,
        account="work/user:1",
        provider="work",
        workspace_id="7",
    )
    assert policy == pb.SetAppPolicyRequest(
        app="app", decision=pb.APP_DECISION_ALLOW, accounts=["user:1"], pin=True
    )


@pytest.mark.parametrize("name", ["get_token", "watch_events"])
def test_errors_map_the_same_on_both(name: str) -> None:
    failure = RpcFailure(grpc.StatusCode.UNAUTHENTICATED, "sign-in required")
    with pytest.raises(NotSignedIn) as sync_error:
        call_sync(name, FakeStub(awaited=False, failure=failure))
    with pytest.raises(NotSignedIn) as async_error:
        call_async(name, FakeStub(awaited=True, failure=failure))
    assert str(sync_error.value) == str(async_error.value) == "UNAUTHENTICATED: sign-in required"

    refused = RpcFailure(grpc.StatusCode.PERMISSION_DENIED, "denied")
    with pytest.raises(BrokerError) as other:
        call_async(name, FakeStub(awaited=True, failure=refused))
    assert (type(other.value), other.value.code) == (BrokerError, refused.code())


def test_the_sdk_page_names_every_method() -> None:
    page = (Path(__file__).parents[2] / "docs" / "how-to" / "python-sdk.md").read_text()
    unnamed = [name for name in surface(BrokerClient) if f"`{name}(" not in page]
    assert unnamed == ["close"]
