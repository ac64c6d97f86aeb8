"""A provider whose sub is a URL (as Salesforce's is) signs in, serves tokens by the account's
id, and survives a restart: the id encodes the ':' the tenant form uses as a separator.
Before, the account could never be saved (the stores refused its id) nor named by a caller."""

from __future__ import annotations

from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker.testing import StubProvider
from signin_broker.testing.daemon import DaemonProcess
from signin_broker.testing.models import StubUser
from support.commands import signin_broker
from support.signin import signed_in_daemon

URL_SUB = "https://login.example.com/id/00D5e000000/0055e000001"
ACCOUNT = "user:https%3A//login.example.com/id/00D5e000000/0055e000001"


def test_a_url_sub_signs_in_is_named_by_its_id_and_survives_a_restart(socket_path: Path) -> None:
    user = StubUser(sub=URL_SUB, name="Sal Force", email="sal@example.com")
    with StubProvider(users=[user], auto_approve=URL_SUB) as stub:
        daemon = signed_in_daemon(stub, socket_path)
        with BrokerClient(socket_path) as client:
            token = client.get_token(ACCOUNT)
            assert token.account == ACCOUNT
            assert client.status().storage_problem == ""  # saved, not only in memory
        listed = signin_broker("--socket", str(socket_path), "accounts").stdout
        assert ACCOUNT in listed
        daemon.stop()
        with (
            DaemonProcess(socket_path, "--issuer", stub.issuer),
            BrokerClient(socket_path) as client,
        ):
            assert client.get_token(ACCOUNT).access_token == token.access_token
