"""The gRPC API through the SDK against a real daemon: statuses, messages, resilience."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpclib.reflection.v1 import reflection_pb2 as v1_reflection

from signin_broker.client import (
    AsyncBrokerClient,
    BrokerClient,
    BrokerError,
    EventKind,
    NotSignedIn,
    SignInState,
)
from signin_broker_testing.daemon import DaemonProcess


@pytest.fixture
def client(shared_daemon: DaemonProcess):
    with BrokerClient(shared_daemon.socket_path, timeout=5) as c:
        yield c


def assert_still_serving(daemon: DaemonProcess) -> None:
    assert daemon.alive
    with BrokerClient(daemon.socket_path, timeout=5) as fresh:
        assert fresh.status().pid == daemon.pid


def test_status_reports_the_daemon_and_the_caller_as_the_kernel_sees_it(
    client: BrokerClient, shared_daemon: DaemonProcess
) -> None:
    status = client.status()
    assert status.pid == shared_daemon.pid
    assert status.socket_path == str(shared_daemon.socket_path)
    assert status.sign_in_state is SignInState.NOT_CONFIGURED
    assert status.issuer == ""
    assert (status.caller.uid, status.caller.gid) == (os.geteuid(), os.getegid())
    assert status.caller.pid == os.getpid()
    assert status.caller.executable == os.path.realpath(sys.executable)


def test_get_token_without_a_session_is_unauthenticated_sign_in_required(
    client: BrokerClient,
) -> None:
    with pytest.raises(NotSignedIn) as caught:
        client.get_token()
    assert caught.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert caught.value.message == "sign-in required"


def test_unknown_account_is_not_found(client: BrokerClient) -> None:
    with pytest.raises(BrokerError) as caught:
        client.get_token("user:nobody")
    assert (caught.value.code, caught.value.message) == (grpc.StatusCode.NOT_FOUND, "not found")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_ttl_seconds": -1}, "min_ttl_seconds must be between 0 and 86400"),
        ({"min_ttl_seconds": 86401}, "min_ttl_seconds must be between 0 and 86400"),
        ({"scopes": ["read:user", 'quote"d']}, "'quote\"d' is not a valid OAuth scope"),
        ({"scopes": [""]}, "'' is not a valid OAuth scope"),
        ({"scopes": [f"s{i}" for i in range(65)]}, "at most 64 scopes may be requested, not 65"),
        ({"account": "a\nb"}, "account must be at most 4096 printable characters"),
    ],
)
def test_bad_get_token_requests_are_invalid_argument_with_the_reason(
    client: BrokerClient, kwargs: dict, message: str, shared_daemon: DaemonProcess
) -> None:
    with pytest.raises(BrokerError) as caught:
        client.get_token(**kwargs)
    assert (caught.value.code, caught.value.message) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert_still_serving(shared_daemon)


def test_oversized_request_is_resource_exhausted_and_the_daemon_stays_up(
    client: BrokerClient, shared_daemon: DaemonProcess
) -> None:
    with pytest.raises(BrokerError) as caught:
        client.get_token(scopes=["x" * 200 for _ in range(1000)])  # ~200 KB
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than" in caught.value.message
    assert_still_serving(shared_daemon)


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x00" * 65536,
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 4096,  # HTTP/2 preface, then junk frames
        os.urandom(1 << 20),
    ],
)
def test_garbage_bytes_on_the_socket_leave_the_daemon_serving(
    shared_daemon: DaemonProcess, garbage: bytes
) -> None:
    with socket.socket(socket.AF_UNIX) as raw:
        raw.connect(str(shared_daemon.socket_path))
        raw.settimeout(5)
        try:
            raw.sendall(garbage)
            raw.shutdown(socket.SHUT_WR)
            while raw.recv(65536):
                pass
        except (BrokenPipeError, ConnectionResetError):
            pass  # grpcio hung up on the junk: fine
    assert_still_serving(shared_daemon)


def test_a_connection_that_never_speaks_does_not_block_others(shared_daemon: DaemonProcess) -> None:
    idle = [socket.socket(socket.AF_UNIX) for _ in range(50)]
    try:
        for sock in idle:
            sock.connect(str(shared_daemon.socket_path))
        assert_still_serving(shared_daemon)
    finally:
        for sock in idle:
            sock.close()


def test_list_accounts_sign_out_and_begin_sign_in_when_not_configured(
    client: BrokerClient,
) -> None:
    assert client.accounts() == []
    result = client.sign_out()
    assert not result.was_signed_in
    with pytest.raises(BrokerError) as caught:
        client.sign_out("user:someone-else")
    assert caught.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(BrokerError) as caught:
        client.begin_sign_in()
    assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "no identity provider is configured: set issuer" in caught.value.message


def test_watch_events_starts_with_a_snapshot(client: BrokerClient) -> None:
    first = next(client.watch_events(timeout=5))
    assert first.kind is EventKind.SNAPSHOT
    assert first.sign_in_state is SignInState.NOT_CONFIGURED
    assert first.occurred_at_unix_ms > 0


def test_watchers_are_told_when_the_daemon_stops(socket_path: Path) -> None:
    daemon = DaemonProcess(socket_path).start()
    outcome: list[object] = []

    def watch() -> None:
        with BrokerClient(socket_path) as watcher:
            events = watcher.watch_events(timeout=30)
            outcome.append(next(events).kind)
            try:
                for event in events:
                    outcome.append(event.kind)
            except BrokerError as error:
                outcome.append(error.code)

    thread = threading.Thread(target=watch)
    thread.start()
    while not outcome:
        thread.join(0.05)
    assert daemon.stop() == 0
    thread.join(10)
    assert outcome == [EventKind.SNAPSHOT, grpc.StatusCode.UNAVAILABLE]


def test_async_client_calls_the_same_api(shared_daemon: DaemonProcess) -> None:
    async def scenario() -> None:
        async with AsyncBrokerClient(shared_daemon.socket_path) as client:
            status = await client.status()
            assert status.caller.pid == os.getpid()
            with pytest.raises(NotSignedIn):
                await client.get_token(min_ttl_seconds=30)
            events = client.watch_events(timeout=5)
            assert (await anext(events)).kind is EventKind.SNAPSHOT
            await events.aclose()
            results = await asyncio.gather(*(client.status() for _ in range(50)))
            assert {r.pid for r in results} == {shared_daemon.pid}

    asyncio.run(scenario())


def test_standard_health_service_reports_serving(shared_daemon: DaemonProcess) -> None:
    with grpc.insecure_channel(f"unix:{shared_daemon.socket_path}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "signin_broker.v1.TokenBroker"):
            response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert response.status == health_pb2.HealthCheckResponse.SERVING


def test_server_reflection_lists_the_api_for_tools_like_grpcurl(
    shared_daemon: DaemonProcess,
) -> None:
    with grpc.insecure_channel(f"unix:{shared_daemon.socket_path}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        response = next(stub.ServerReflectionInfo(iter([request]), timeout=5))
        names = {s.name for s in response.list_services_response.service}
        assert {"signin_broker.v1.TokenBroker", "grpc.health.v1.Health"} <= names
        # v1, as newer tools ask; the file describing the service (descriptor_pb2, loaded
        # at the first reflection call)
        v1 = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=v1_reflection.ServerReflectionRequest.SerializeToString,
            response_deserializer=v1_reflection.ServerReflectionResponse.FromString,
        )
        asked = v1_reflection.ServerReflectionRequest(
            file_containing_symbol="signin_broker.v1.TokenBroker"
        )
        described = next(v1(iter([asked]), timeout=5)).file_descriptor_response
        assert described.file_descriptor_proto  # the serialized broker.proto


def test_sdk_finds_the_socket_through_the_environment(
    shared_daemon: DaemonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIGNIN_BROKER_SOCKET", str(shared_daemon.socket_path))
    with BrokerClient() as client:
        assert client.socket_path == str(shared_daemon.socket_path)
        assert client.status().pid == shared_daemon.pid


def test_a_restarted_daemon_is_reached_again_by_the_same_client(socket_path: Path) -> None:
    with BrokerClient(socket_path, timeout=5) as client:
        first = DaemonProcess(socket_path).start()
        assert client.status().pid == first.pid
        first.stop()
        with DaemonProcess(socket_path) as second:
            for _ in range(50):  # the channel reconnects within its 1 s backoff cap
                try:
                    assert client.status().pid == second.pid
                    break
                except BrokerError:
                    threading.Event().wait(0.1)
            else:
                pytest.fail("the client did not reconnect to the restarted daemon")
