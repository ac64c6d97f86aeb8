"""Requests whose body is no protobuf at all, sent to every RPC in bulk.

Before the fix each one logged an error with a traceback (grpcio's "Exception
deserializing request!") and ended INTERNAL: log volume any local caller controls.
Each must be INVALID_ARGUMENT, and the log must hold no error and no traceback.
"""

from __future__ import annotations

import grpc

from signin_broker.client import BrokerClient
from signin_broker.v1 import broker_pb2 as pb
from signin_broker_testing.daemon import DaemonProcess

REQUESTS = 200
SERVICE = pb.DESCRIPTOR.services_by_name["TokenBroker"]
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
    method = SERVICE.methods[number % len(SERVICE.methods)]
    path = f"/{SERVICE.full_name}/{method.name}"
    body = NOT_PROTOBUF[number % len(NOT_PROTOBUF)]
    try:
        if method.server_streaming:  # no serializers: the bytes go out as they are
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
