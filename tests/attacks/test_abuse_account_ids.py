"""Attacks with malformed account ids: every RPC says INVALID_ARGUMENT.

`ListAuditEvents(account="user:a b")` answered INTERNAL after an error-level traceback:
the RPC layer let through ids that the stores refuse. An id is checked once, where the
request comes in, against the one form every store accepts. An account may also be
named by an alias, an e-mail or a login: anything that looks like an id (`user:...`,
`<alias>/user:...`, in any case) must still be one, and any other printable name that
fits no account is NOT_FOUND (or, for a write, INVALID_ARGUMENT).
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest

from signin_broker.client import AppDecision, BrokerClient, BrokerError
from signin_broker_testing.daemon import DaemonProcess

MALFORMED = [
    "user:a b",
    "user:",
    "User:1001",
    "user:1001:workspace:",
    "user:1001:workspace:7:x",
    "user:1001:tenant:7",
    "user:a\u00a0b",  # a no-break space: printable, and whitespace
    "user:" + "9" * 4100,  # over MAX_ACCOUNT_ID_LENGTH, what any 255-character sub makes
]

CALLS: dict[str, Callable[[BrokerClient, str], object]] = {
    "GetToken": lambda client, account: client.get_token(account),
    "GetToken(audience)": lambda client, account: client.get_token(
        account, audience="https://api.example/"
    ),
    "BeginSignIn(device)": lambda client, account: client.begin_sign_in(
        device=True, account=account
    ),
    "SignOut": lambda client, account: client.sign_out(account),
    "SetDefaultAccount": lambda client, account: client.set_default_account(account),
    "RemoveAccount": lambda client, account: client.remove_account(account),
    "ListAuditEvents": lambda client, account: client.audit_events(account=account),
    "SetAppPolicy": lambda client, account: client.set_app_policy(
        "/usr/bin/true", AppDecision.ALLOW, accounts=[account]
    ),
}


@pytest.mark.parametrize("rpc", sorted(CALLS))
def test_a_malformed_account_id_is_invalid_argument_in_every_rpc(
    broker: DaemonProcess, rpc: str
) -> None:
    with BrokerClient(broker.socket_path, timeout=10) as client:
        for account in MALFORMED:
            with pytest.raises(BrokerError) as caught:
                CALLS[rpc](client, account)
            assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT, (account, caught.value)
            assert "account" in caught.value.message
        assert client.status().pid == broker.pid
    assert not [r for r in broker.records() if r.get("msg") == "unexpected error"]


def test_list_audit_events_of_a_spaced_account_id_is_invalid_argument_without_a_traceback(
    broker: DaemonProcess,
) -> None:
    with BrokerClient(broker.socket_path, timeout=10) as client:
        with pytest.raises(BrokerError) as caught:
            client.audit_events(account="user:a b")
        assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "Traceback" not in broker.output()
        assert client.audit_events(account="user:1001") == []  # well-formed, no rows: fine
        with pytest.raises(BrokerError) as caught:
            client.get_token("user:1001:workspace:7")  # well-formed, unknown: as before
        assert (caught.value.code, caught.value.message) == (grpc.StatusCode.NOT_FOUND, "not found")


@pytest.mark.parametrize("rpc", ["GetToken", "SignOut", "SetDefaultAccount", "ListAuditEvents"])
def test_a_name_no_account_has_is_not_found_in_every_rpc(broker: DaemonProcess, rpc: str) -> None:
    with BrokerClient(broker.socket_path, timeout=10) as client:
        for name in ("user", "1001", "nobody@example.com", "Alice Example"):
            with pytest.raises(BrokerError) as caught:
                CALLS[rpc](client, name)
            assert (caught.value.code, caught.value.message) == (
                grpc.StatusCode.NOT_FOUND,
                "not found",
            )
