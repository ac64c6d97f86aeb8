"""Kernel-verified callers: attribution, refusal of other users, and no forged identities."""

from __future__ import annotations

import errno
import json
import os
import pwd
import subprocess
import sys

import grpc

from signin_broker.client import BrokerClient
from signin_broker.v1 import broker_pb2, broker_pb2_grpc
from signin_broker_testing.daemon import DaemonProcess
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


def test_iso_T1_other_user_is_closed_before_any_handler_runs(daemon: DaemonProcess) -> None:
    """Even with the folder and socket opened up by mistake, the kernel check refuses them.

    The connection is closed at accept, before a byte is read (as ssh-agent does), so
    the handler's own INVALID_ARGUMENT never comes: the client sees the socket closed.
    """
    user = other_user()
    for folder in (daemon.socket_path.parent.parent, daemon.socket_path.parent):
        folder.chmod(0o711)
    daemon.socket_path.chmod(0o666)
    assert run_as(user, daemon.socket_path, "connect") == {"connected": True}
    outcome = run_as(user, daemon.socket_path, "bad-token-request")
    assert outcome["code"] == "UNAVAILABLE"
    assert run_as(user, daemon.socket_path, "status")["code"] == "UNAVAILABLE"
    refusals = daemon.expect_log(msg="refused a caller of another user")
    assert refusals[0]["caller_uid"] == pwd.getpwnam(user).pw_uid
    with BrokerClient(daemon.socket_path) as mine:  # the owner is still served
        assert mine.status().caller.uid == os.geteuid()
