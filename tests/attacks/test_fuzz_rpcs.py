"""Every RPC of TokenBroker, fuzzed with arbitrary fields, bytes and metadata.

The daemon is signed in to the stub (Alice, Bob, and Alice within workspace 7), so that
GetToken and the account RPCs reach their real paths. Requests are built from the
request types' descriptors (so a new RPC or field is fuzzed without a change here), and
also sent as raw bytes that are no valid message at all. Whatever comes in, a call ends
with OK or one of the statuses the contract names, never INTERNAL or UNKNOWN; no
answer but GetToken's carries a secret; the daemon keeps serving and logs no traceback
or error for any of it. Examples are bounded and derandomized, so a run is repeatable.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator, Sequence
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import event, given, settings
from hypothesis import strategies as st

from signin_broker.client._channel import target
from signin_broker.v1 import broker_pb2 as pb
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from signin_broker_testing.ledger import SecretLedger
from support.accounts import ALICE, ALICE_AT_7, ALICE_ID, BOB, BOB_ID, daemon_with_accounts
from support.fuzzing import FUZZ, troubled_lines, weighted
from support.leaks import SecretIndex

SERVICE = pb.DESCRIPTOR.services_by_name["TokenBroker"]
# Last, so that the RPCs before them run against a daemon that still has its accounts.
DESTRUCTIVE = ("SetDefaultAccount", "SignOut", "RemoveAccount")
UNARY = sorted(
    (m for m in SERVICE.methods if not m.server_streaming), key=lambda m: m.name in DESTRUCTIVE
)
STREAMING = [m for m in SERVICE.methods if m.server_streaming]
CALL_SECONDS = 20.0
EXPECTED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAVAILABLE,  # only with the daemon alive: the provider, a dropped watcher
}

# -- strategies -------------------------------------------------------------------------------

ACCOUNTS = ["", ALICE_ID, BOB_ID, ALICE_AT_7, "user:1001:workspace:8", "user:9999", "user:a b"]
ODD_TEXT = [
    "\x00",
    "user:1001\x00",
    "user:1001\n",
    " user:1001",
    "USER:1001",
    "user:",
    "user:1001:workspace:",
    "user:1001:workspace:7:workspace:7",
    "user:../../etc/passwd",
    "app:/nonexistent/tool",
    "-1",
    "9" * 40,
    "openid",
    "openid profile",
    "email\x7f",
    "https://api.example.com/",
    "https://api.example.com/#fragment",
    "http://[::1",
    "//evil.example/",
    "javascript:alert(1)",
    "/dashboard?tab=apps",
    "\\\\evil.example\\share",
    "%00%2e%2e",
    "' OR 1=1 --",
    "\u202egnp.exe",
    "\U0001f600" * 3,
    "\ud7ff\ue000\uffff",
]
TEXT = st.one_of(
    st.text(max_size=30),  # any code point but surrogates: NUL, controls, emoji
    st.sampled_from(ACCOUNTS + ODD_TEXT),
    st.builds(
        lambda piece, times: piece * times,
        st.text(min_size=1, max_size=3),
        st.integers(300, 20_000),
    ),
)
BEGUN: list[str] = []  # the sign_in_ids BeginSignIn handed out during the run
# Hints by field name, mixed in so that the real paths (a real account, a granted scope,
# a valid resource URI) are reached, not only the checks at the door.
HINTS: dict[str, st.SearchStrategy[Any]] = {
    "account": st.sampled_from(ACCOUNTS),
    "accounts": st.sampled_from(ACCOUNTS[1:]),
    "scopes": st.sampled_from(["openid", "profile", "email", "offline_access", "admin"]),
    "audience": st.builds("https://api{}.example.com/".format, st.integers(0, 5)),
    "workspace_id": st.sampled_from(["", "7", "8", "0", "999999999999999999"]),
    "redirect_to": st.sampled_from(["", "/dashboard", "/dashboard?tab=apps", "http://evil/"]),
    "limit": st.sampled_from([0, 1, 1000, 1001]),
    "min_ttl_seconds": st.sampled_from([0, 60, 3000, 86_400]),
    "acr_values": st.sampled_from(["", "urn:stub:acr:pwd", "urn:stub:acr:mfa x", 'a"b']),
    "max_age_seconds": st.sampled_from([0, 300, 2**31, -1]),
    # Mostly the sign-in BeginSignIn began last (likely still pending), so the QR is drawn.
    "sign_in_id": st.integers(0, 9).map(
        lambda back: BEGUN[-1 - back % len(BEGUN)] if BEGUN else ""
    ),
}
INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_ENUM: (-(2**31), 2**31 - 1),  # open enums: unknown numbers too
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


def _integers(kind: int) -> st.SearchStrategy[int]:
    low, high = INT_RANGES[kind]
    edges = [
        v for v in (low, high, -1, 0, 1, 59, 60, 86_400, 86_401, 1000, 1001) if low <= v <= high
    ]
    return st.one_of(st.integers(low, high), st.sampled_from(edges))


def _scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_STRING:
        return TEXT
    if field.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=200)
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(width=32 if field.type == FieldDescriptor.TYPE_FLOAT else 64)
    if field.type == FieldDescriptor.TYPE_ENUM:
        known = [value.number for value in field.enum_type.values]
        return st.one_of(st.sampled_from(known), _integers(field.type))
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return messages(field.message_type)
    return _integers(field.type)


def _map_values(field: FieldDescriptor) -> st.SearchStrategy[dict[Any, Any]]:
    """A map field's values: a dict of its entry type's key and value (a few, or many)."""
    key, value = (field.message_type.fields_by_name[name] for name in ("key", "value"))
    return weighted(
        (4, st.dictionaries(_scalar(key), _scalar(value), max_size=6)),
        (1, st.dictionaries(_scalar(key), _scalar(value), min_size=20, max_size=40)),
    )


def _field_values(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        return _map_values(field)
    one = _scalar(field)
    if field.name in HINTS:
        one = weighted((3, HINTS[field.name]), (1, one))
    if not field.is_repeated:
        return one
    short = _scalar(field) if field.type != FieldDescriptor.TYPE_STRING else st.text(max_size=6)
    return weighted((4, st.lists(one, max_size=6)), (1, st.lists(short, min_size=60, max_size=90)))


def messages(descriptor: Descriptor) -> st.SearchStrategy[Message]:
    """Messages of this type with any subset of their fields set to arbitrary values."""
    fields = {
        field.name: weighted((2, st.none()), (3, _field_values(field)))
        for field in descriptor.fields
    }
    cls = GetMessageClass(descriptor)
    return st.fixed_dictionaries(fields).map(
        lambda values: cls(**{k: v for k, v in values.items() if v is not None})
    )


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        out.append((number & 0x7F) | (0x80 if number > 0x7F else 0))
        number >>= 7
        if not number:
            return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint((number << 3) | wire_type)


FIELD_NUMBERS = st.one_of(st.integers(1, 16), st.integers(0, 2**29 - 1))
WIRE_FIELDS = st.one_of(
    st.builds(lambda n, v: _tag(n, 0) + _varint(v), FIELD_NUMBERS, st.integers(0, 2**64 - 1)),
    st.builds(  # a length that may lie, and bytes that may not be UTF-8
        lambda n, data, lie: _tag(n, 2) + _varint(max(0, len(data) + lie)) + data,
        FIELD_NUMBERS,
        st.one_of(st.binary(max_size=40), st.sampled_from([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80"])),
        st.sampled_from([0, 0, 0, -1, 1, 2**20]),
    ),
    st.builds(lambda n, d: _tag(n, 1) + d, FIELD_NUMBERS, st.binary(min_size=8, max_size=8)),
    st.builds(lambda n, d: _tag(n, 5) + d, FIELD_NUMBERS, st.binary(min_size=4, max_size=4)),
    st.builds(_tag, FIELD_NUMBERS, st.sampled_from([3, 4, 6, 7])),  # groups, bad wire types
    st.binary(min_size=1, max_size=3),  # a cut-off tag or varint
)
RAW = st.one_of(st.binary(max_size=300), st.lists(WIRE_FIELDS, max_size=6).map(b"".join))
METADATA = st.lists(
    st.tuples(
        st.from_regex(r"[a-z][a-z0-9_.-]{0,20}", fullmatch=True).filter(
            lambda key: not key.startswith("grpc-") and key not in {"te", "content-type"}
        ),
        st.from_regex(r"[!-~]{0,40}", fullmatch=True),
    ),
    max_size=4,
)

# -- the daemon under fuzz ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def people() -> Iterator[StubProvider]:
    with StubProvider(users=[ALICE, BOB], auto_approve=ALICE.sub) as provider:
        yield provider


@pytest.fixture(scope="module")
def fuzzed(people: StubProvider) -> Iterator[DaemonProcess]:
    """A daemon signed in as Alice, Bob, and Alice within workspace 7."""
    folder = short_temp_dir()
    # A step-up asked for is begun but not waited for: a call's answer comes at once.
    socket_path = folder / "run" / "broker.sock"
    daemon = daemon_with_accounts(people, socket_path, "--step-up-timeout-seconds", "0")
    yield daemon
    if daemon.alive:
        daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def channel(fuzzed: DaemonProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(target(str(fuzzed.socket_path))) as opened:
        yield opened


@pytest.fixture
def untroubled(fuzzed: DaemonProcess) -> Iterator[None]:
    """After the test: the daemon still serves and wrote no traceback or error meanwhile."""
    first = len(fuzzed.lines)
    yield
    assert fuzzed.alive, fuzzed.output()[-3000:]
    with grpc.insecure_channel(target(str(fuzzed.socket_path))) as fresh:
        status = pb.GetStatusResponse.FromString(
            fresh.unary_unary(_path(SERVICE.methods_by_name["GetStatus"]))(
                b"", timeout=CALL_SECONDS
            )
        )
    assert status.pid == fuzzed.pid
    trouble = troubled_lines(fuzzed.lines[first:])
    assert not trouble, "\n".join(trouble[:5])


def _path(method: MethodDescriptor) -> str:
    return f"/{SERVICE.full_name}/{method.name}"


def call(
    channel: grpc.Channel,
    method: MethodDescriptor,
    body: bytes,
    metadata: Sequence[tuple[str, str]] = (),
) -> tuple[grpc.StatusCode, str, bytes]:
    """One unary call with a raw body (no serializer): its status, details and answer."""
    rpc = channel.unary_unary(_path(method))
    try:
        answer = rpc(body, timeout=CALL_SECONDS, metadata=list(metadata))
    except grpc.RpcError as error:
        return error.code(), error.details() or "", b""  # type: ignore[attr-defined]
    return grpc.StatusCode.OK, "", answer


def check_outcome(
    daemon: DaemonProcess,
    method: MethodDescriptor,
    sent: object,
    outcome: tuple[grpc.StatusCode, str, bytes],
) -> None:
    """An expected status, and no secret in the error text or (but for a token's) the answer."""
    code, details, answer = outcome
    event(code.name)  # --hypothesis-show-statistics tells how far the examples got
    assert code in EXPECTED, f"{method.name}({sent!r}) -> {code}: {details}"
    if code == grpc.StatusCode.UNAVAILABLE:
        assert daemon.alive, (
            f"{method.name}({sent!r}) killed the daemon:\n{daemon.output()[-3000:]}"
        )
    secrets = SecretIndex(SecretLedger.secrets())
    assert not secrets.found_in(details), f"{method.name}({sent!r}): a secret in the error text"
    if answer and method.name not in ("GetToken", "SignDpopProof"):
        message = GetMessageClass(method.output_type).FromString(answer)
        assert not secrets.found_in(str(message)), (
            f"{method.name}({sent!r}): a secret in the answer"
        )
        if method.name == "BeginSignIn":
            BEGUN.append(message.sign_in_id)


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("untroubled")
@pytest.mark.parametrize("method", UNARY, ids=lambda m: m.name)
@FUZZ
@given(data=st.data())
def test_fuzz_each_rpc_with_arbitrary_field_values(
    method: MethodDescriptor, fuzzed: DaemonProcess, channel: grpc.Channel, data: st.DataObject
) -> None:
    request = data.draw(messages(method.input_type), label="request")
    metadata = data.draw(METADATA, label="metadata")
    outcome = call(channel, method, request.SerializeToString(), metadata)
    check_outcome(fuzzed, method, request, outcome)


@pytest.mark.usefixtures("untroubled")
@pytest.mark.parametrize("method", UNARY, ids=lambda m: m.name)
@settings(FUZZ, max_examples=60)
@given(body=RAW)
def test_fuzz_each_rpc_with_malformed_request_bytes(
    method: MethodDescriptor, fuzzed: DaemonProcess, channel: grpc.Channel, body: bytes
) -> None:
    check_outcome(fuzzed, method, body, call(channel, method, body))


@pytest.mark.usefixtures("untroubled")
@pytest.mark.parametrize("method", STREAMING, ids=lambda m: m.name)
@settings(FUZZ, max_examples=30)
@given(data=st.data())
def test_fuzz_each_stream_opened_with_any_request_then_cancelled(
    method: MethodDescriptor, fuzzed: DaemonProcess, channel: grpc.Channel, data: st.DataObject
) -> None:
    requests = messages(method.input_type).map(lambda message: message.SerializeToString())
    body = data.draw(st.one_of(requests, RAW), label="body")
    stream = channel.unary_stream(_path(method))(body, timeout=CALL_SECONDS)
    try:
        first = GetMessageClass(method.output_type).FromString(next(stream))
    except grpc.RpcError as error:
        outcome = (error.code(), error.details() or "", b"")  # type: ignore[attr-defined]
        check_outcome(fuzzed, method, body, outcome)
    else:
        event("OK")
        assert first.kind == pb.EVENT_KIND_SNAPSHOT, first
    finally:
        stream.cancel()


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@pytest.mark.usefixtures("untroubled")
@settings(FUZZ, max_examples=40)
@given(
    body=st.one_of(
        st.binary(max_size=300),
        st.builds(lambda cut: PREFACE[:cut], st.integers(0, len(PREFACE))),
        st.builds(lambda rest: PREFACE + rest, st.binary(max_size=300)),
    )
)
def test_fuzz_the_socket_with_bytes_that_are_not_grpc(fuzzed: DaemonProcess, body: bytes) -> None:
    """Garbage, a cut-off HTTP/2 preface, a preface then garbage: the daemon shrugs it off."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(1.0)  # whether the daemon answers or waits, it is done with us
        raw.connect(str(fuzzed.socket_path))
        try:
            raw.sendall(body)
            raw.shutdown(socket.SHUT_WR)
            for _ in range(64):  # read until the daemon closes (bounded)
                if not raw.recv(65536):
                    break
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # hung up on, or left waiting: both fine
