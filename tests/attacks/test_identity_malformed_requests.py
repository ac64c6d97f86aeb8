"""Requests whose body is no protobuf at all, sent to every RPC in bulk, and cut short.

Before the fix each one logged an error with a traceback (grpcio's "Exception
deserializing request!") and ended INTERNAL: log volume any local caller controls.
Each must be INVALID_ARGUMENT, and the log must hold no error and no traceback. The
same holds for the stock services beside the API: a malformed health check logged a
traceback each time (200 of them: 305 KB of log in 0.7 s), and so did a message cut
short on any method, the API's included.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import grpc
import h2.config
import h2.connection
import h2.events

from signin_broker.client import BrokerClient
from signin_broker.v1 import broker_pb2 as pb
from signin_broker_testing.daemon import DaemonProcess

REQUESTS = 200
SERVICE = pb.DESCRIPTOR.services_by_name["TokenBroker"]
# (path, whether it answers a stream, whether it reads one): every RPC the socket serves.
METHODS = [
    *((f"/{SERVICE.full_name}/{m.name}", m.server_streaming, False) for m in SERVICE.methods),
    ("/grpc.health.v1.Health/Check", False, False),
    ("/grpc.health.v1.Health/Watch", True, False),
    ("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", True, True),
    ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", True, True),
]
NOT_PROTOBUF = [
    b"\x0f",  # field 1 with wire type 7, which does not exist
    b"\x08",  # a varint field cut off before its value
    b"\x0a\x05ab",  # a length-delimited field shorter than its length
    b"\x08" + b"\xff" * 10 + b"\x01",  # a varint longer than ten bytes
    b"\x00",  # field number 0
    b"\x0c",  # an end-group with no group
    b"\x0b",  # a group that never ends
    b"\xff",  # a tag cut off
]


def call_raw(channel: grpc.Channel, number: int) -> grpc.StatusCode:
    """Request `number`: one body that does not parse, sent to one method (all in turn)."""
    path, answers_a_stream, reads_a_stream = METHODS[number % len(METHODS)]
    body = NOT_PROTOBUF[number % len(NOT_PROTOBUF)]
    try:  # no serializers: the bytes go out as they are
        if reads_a_stream:
            list(channel.stream_stream(path)(iter([body]), timeout=10))
        elif answers_a_stream:
            list(channel.unary_stream(path)(body, timeout=10))
        else:
            channel.unary_unary(path)(body, timeout=10)
    except grpc.RpcError as error:
        return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_requests_that_are_not_protobuf_are_invalid_argument_and_log_no_error(
    daemon: DaemonProcess,
) -> None:
    with grpc.insecure_channel(f"unix:{daemon.socket_path}") as channel:
        codes = [call_raw(channel, number) for number in range(REQUESTS)]
    wrong = {n: code for n, code in enumerate(codes) if code != grpc.StatusCode.INVALID_ARGUMENT}
    assert not wrong, wrong
    with BrokerClient(daemon.socket_path, timeout=10) as client:  # still serving
        client.status()
    assert "Traceback" not in daemon.output()
    troubled = [r for r in daemon.records() if r["severity"] in ("error", "critical")]
    assert not troubled, troubled


# What a gRPC client cannot be made to send: a message's body or prefix cut off by the
# end of the stream, and no message at all (a stream of requests may have none).
CUT_SHORT = [struct.pack(">?I", False, 100) + b"\x0a\x01", b"\x00\x00"]
INVALID = str(grpc.StatusCode.INVALID_ARGUMENT.value[0])


def test_requests_cut_short_are_invalid_argument_and_log_no_error(
    daemon: DaemonProcess,
) -> None:
    for path, _, reads_a_stream in METHODS:
        for data in [*CUT_SHORT, *([] if reads_a_stream else [b""])]:
            status, message = _raw_call(daemon.socket_path, path, data)
            assert (status, message[:12]) == (INVALID, "the request "), (path, data, message)
    assert "Traceback" not in daemon.output()
    troubled = [r for r in daemon.records() if r["severity"] in ("error", "critical")]
    assert not troubled, troubled


def _raw_call(socket_path: Path, path: str, data: bytes) -> tuple[str, str]:
    """One call over HTTP/2 by hand, `data` its whole request: its grpc-status and message."""
    http = h2.connection.H2Connection(h2.config.H2Configuration(header_encoding="utf-8"))
    http.initiate_connection()
    headers = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "b"),
               ("content-type", "application/grpc"), ("te", "trailers")]  # fmt: skip
    http.send_headers(1, headers)
    http.send_data(1, data, end_stream=True)
    answer: dict[str, str] = {}
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(socket_path))
        conn.sendall(http.data_to_send())
        for _ in range(100):  # bounded: the daemon answers in a few frames
            received = conn.recv(65536)
            assert received, f"closed without an answer to {path}"
            events = http.receive_data(received)
            for event in events:
                if isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    answer.update(event.headers)
            if any(isinstance(event, h2.events.StreamEnded) for event in events):
                break
            conn.sendall(http.data_to_send())
    return answer.get("grpc-status", ""), answer.get("grpc-message", "")
