"""Kernel-verified callers: attribution, refusal of other users, and no forged identities."""

from __future__ import annotations

import errno
import json
import os
import pwd
import re
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from signin_broker.client import BrokerClient
from signin_broker.testing.daemon import DaemonProcess
from signin_broker.v1 import broker_pb2, broker_pb2_grpc
from support.commands import BIN
from support.other_user import other_user, run_as


def test_each_caller_is_attributed_to_its_own_process(daemon: DaemonProcess) -> None:
    """A child process is seen with its own pid, never its parent's or anything it claims."""
    child = subprocess.Popen(
        [str(BIN / "signin-broker"), "--socket", str(daemon.socket_path), "status", "--json"],
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = child.communicate(timeout=30)
    caller = json.loads(out)["caller"]
    assert caller["pid"] == child.pid
    assert caller["uid"] == os.geteuid()
    assert caller["executable"] == os.path.realpath(sys.executable)


def test_identity_cannot_be_claimed_through_metadata(daemon: DaemonProcess) -> None:
    with grpc.insecure_channel(f"unix:{daemon.socket_path}") as channel:
        stub = broker_pb2_grpc.TokenBrokerStub(channel)
        status = stub.GetStatus(
            broker_pb2.GetStatusRequest(),
            metadata=[("x-forwarded-uid", "1234"), ("pid", "1"), ("uid", "0")],
            timeout=5,
        )
    assert status.caller.pid == os.getpid()


def test_other_user_cannot_even_open_the_socket(daemon: DaemonProcess) -> None:
    user = other_user()
    outcome = run_as(user, daemon.socket_path, "connect")
    assert outcome == {"connected": False, "errno": errno.EACCES}


def test_T1_other_user_is_permission_denied_before_any_handler_runs(daemon: DaemonProcess) -> None:
    """Even with the folder and socket opened up by mistake, the kernel check refuses them."""
    user = other_user()
    for folder in (daemon.socket_path.parent.parent, daemon.socket_path.parent):
        folder.chmod(0o711)
    daemon.socket_path.chmod(0o666)
    assert run_as(user, daemon.socket_path, "connect") == {"connected": True}
    outcome = run_as(user, daemon.socket_path, "bad-token-request")
    # PERMISSION_DENIED, not the INVALID_ARGUMENT the handler would have answered.
    assert outcome["code"] == "PERMISSION_DENIED"
    assert (
        f"uid {pwd.getpwnam(user).pw_uid} may not use the broker of uid {os.geteuid()}"
        in (outcome["message"])
    )
    assert run_as(user, daemon.socket_path, "status")["code"] == "PERMISSION_DENIED"
    refusals = daemon.expect_log(msg="refused a caller of another user")
    assert refusals[0]["caller_uid"] == pwd.getpwnam(user).pw_uid
    with BrokerClient(daemon.socket_path) as mine:  # the owner is still served
        assert mine.status().caller.uid == os.geteuid()


def test_T1_connecting_straight_to_the_private_grpc_socket_gives_no_identity(
    daemon: DaemonProcess,
) -> None:
    private = daemon.socket_path.parent / f".{daemon.socket_path.name}.grpc"
    with grpc.insecure_channel(f"unix:{private}") as channel:
        stub = broker_pb2_grpc.TokenBrokerStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetStatus(broker_pb2.GetStatusRequest(), timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "connect through the broker socket" in caught.value.details()


def live_relay_names() -> set[str]:
    """Abstract socket names the daemon's relays hold, from the kernel's socket table."""
    table = Path("/proc/net/unix").read_text()
    return set(re.findall(r"@(signin-broker\.[0-9a-f]{32})", table))


def test_a_relay_address_cannot_be_taken_over_while_its_connection_lives(
    daemon: DaemonProcess,
) -> None:
    """An impostor binding a live relay's address and dialling the private socket fails."""
    with BrokerClient(daemon.socket_path) as client:
        client.status()  # holds a relayed connection open
        names = live_relay_names()
        assert names, "the relay binds abstract names that the kernel lists"
        for name in names:
            impostor = socket.socket(socket.AF_UNIX)
            with pytest.raises(OSError) as caught:
                impostor.bind("\0" + name)
            impostor.close()
            assert caught.value.errno == errno.EADDRINUSE


def test_T1_an_impostor_with_its_own_abstract_address_is_refused(daemon: DaemonProcess) -> None:
    """A made-up relay-looking address is not registered, so it carries no identity."""
    private = daemon.socket_path.parent / f".{daemon.socket_path.name}.grpc"
    forged = f"signin-broker.{'0' * 32}"
    # grpcio cannot bind a client socket, so speak through a relay of our own making.
    relay_dir = daemon.socket_path.parent.parent / "impostor"
    relay_dir.mkdir(mode=0o700)
    front = relay_dir / "front.sock"
    code = subprocess.run(
        [sys.executable, "-c", IMPOSTOR_RELAY, str(front), str(private), forged],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert code.returncode == 0, code.stderr
    assert code.stdout.strip() == "UNAUTHENTICATED"


IMPOSTOR_RELAY = r"""
import socket, sys, threading, grpc
from signin_broker.v1 import broker_pb2, broker_pb2_grpc
front_path, private_path, name = sys.argv[1:4]
listener = socket.socket(socket.AF_UNIX); listener.bind(front_path); listener.listen()
def pump(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
def serve():
    conn, _ = listener.accept()
    up = socket.socket(socket.AF_UNIX); up.bind("\0" + name); up.connect(private_path)
    threading.Thread(target=pump, args=(conn, up), daemon=True).start()
    pump(up, conn)
threading.Thread(target=serve, daemon=True).start()
with grpc.insecure_channel("unix:" + front_path) as channel:
    try:
        broker_pb2_grpc.TokenBrokerStub(channel).GetStatus(broker_pb2.GetStatusRequest(), timeout=5)
        print("OK")
    except grpc.RpcError as error:
        print(error.code().name)
"""
