"""A provider whose sub is a URL (as Salesforce's is), or as long as OpenID Connect allows,
signs in, serves tokens by the account's id, and survives a restart: the id encodes the
':' the tenant form uses as a separator. Before, the URL's account could never be saved
(the stores refused its id) nor named by a caller, and the longest one's state file
outgrew a file name."""

from __future__ import annotations

from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.models import StubUser
from support.commands import signin_broker
from support.signin import signed_in_daemon

URL_SUB = "https://login.example.com/id/00D5e000000/0055e000001"
LONGEST_SUB = "https://example.com/" + "x:" * 117  # 254 characters, 117 of them ':'


@pytest.mark.parametrize("sub", [URL_SUB, LONGEST_SUB], ids=["url", "longest"])
def test_a_url_sub_signs_in_is_named_by_its_id_and_survives_a_restart(
    socket_path: Path, sub: str
) -> None:
    account = "user:" + sub.replace(":", "%3A")
    user = StubUser(sub=sub, name="Sal Force", email="sal@example.com")
    with StubProvider(users=[user], auto_approve=sub) as stub:
        daemon = signed_in_daemon(stub, socket_path)
        with BrokerClient(socket_path) as client:
            token = client.get_token(account)
            assert token.account == account
            assert client.status().storage_problem == ""  # saved, not only in memory
        listed = signin_broker("--socket", str(socket_path), "accounts").stdout
        assert account in listed
        daemon.stop()
        with (
            DaemonProcess(socket_path, "--issuer", stub.issuer),
            BrokerClient(socket_path) as client,
        ):
            assert client.get_token(account).access_token == token.access_token
