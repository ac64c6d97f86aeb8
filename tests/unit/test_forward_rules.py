"""Forwards without a daemon: who may connect, which calls are served, where sockets may go.

The integration tests run as root in CI, where the owner and root are one uid: the
uid rule is held here with callers of other uids. Every call of the service that is
not in ALLOWED_ON_A_FORWARD is refused, whatever its body, including calls added later.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from signin_broker.daemon.api.account_access import Admitted
from signin_broker.daemon.api.dispatch import ServiceHandlers
from signin_broker.daemon.api.json_calls import JSON, JsonCalls
from signin_broker.daemon.api.transport import ConnectionTable, TransportGate
from signin_broker.daemon.apps.gate import AppGate
from signin_broker.daemon.apps.policy import Decision, PolicyFile
from signin_broker.daemon.callers.forwarded import ForwardConnection, ForwardGrant, forward_uids
from signin_broker.daemon.callers.identity import Caller
from signin_broker.daemon.host.forward_sockets import ForwardSocket, ForwardSocketError
from signin_broker.daemon.refusals import AppDenied, FixedAtOpening
from signin_broker.identities import AppId, AppKind
from signin_broker.v1 import broker_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["TokenBroker"]
OWNER = 1000
ALLOWED_ON_A_FORWARD = {"GetToken", "GetStatus", "SignDpopProof"}  # the access table's forwards
REDUCED = "GetStatus"


class _Transport:
    def get_extra_info(self, name: str) -> None:
        return None

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


@pytest.mark.parametrize(("uid", "admitted"), [(OWNER, True), (0, True), (1001, False)])
def test_a_forward_admits_its_owner_and_root_and_no_other_uid(uid: int, admitted: bool) -> None:
    def identify(sock: socket.socket | None, number: int) -> Caller:
        return Caller(uid, uid, 4242, "", number)

    gate = TransportGate(forward_uids(OWNER), ConnectionTable(), identify)
    assert (gate.check(_Transport()) is not None) is admitted
    assert gate.admitted == int(admitted)


class _Servicer:
    """Every method of the service, answering with its own name (a stand-in for the servicers)."""

    def __getattr__(self, name: str) -> Any:
        if name not in SERVICE.methods_by_name:
            raise AttributeError(name)

        async def served(request: object, admitted: Admitted) -> pb.GetStatusResponse:
            return pb.GetStatusResponse(version=name)

        return served


async def _reduced(request: object, admitted: Admitted) -> pb.GetStatusResponse:
    return pb.GetStatusResponse(version="reduced")


def test_only_the_allowed_calls_are_served_on_a_forward(tmp_path: Path) -> None:
    """Both paths are walked for every caller in tests/unit/test_access_table.py; here JSON."""
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ALLOW, ask_timeout=30)
    ready = asyncio.Event()
    ready.set()
    broker = ServiceHandlers([_Servicer()], SERVICE, apps=gate, ready=ready)
    handlers = broker.replacing({REDUCED: _reduced})
    calls = JsonCalls(handlers.unary)
    caller = _forward_caller(ForwardGrant("box", None))
    assert set(handlers.__mapping__()) == set(broker.__mapping__())  # a call added later too
    for method in SERVICE.methods:
        path = f"/{SERVICE.full_name}/{method.name}"
        if method.name in ALLOWED_ON_A_FORWARD or method.server_streaming:
            continue
        for content_type, body in ((JSON, b"{}"), (JSON, b'{"no_such_field": 1}'),
                                   ("text/plain", b"\xff")):  # fmt: skip
            status, answer, _ = asyncio.run(calls.answer(path, content_type, body, caller))
            assert status == 403 and json.loads(answer)["code"] == "permission_denied"
            assert "not available through a forward" in json.loads(answer)["error"]
    for name in ALLOWED_ON_A_FORWARD:
        answer = calls.answer(f"/{SERVICE.full_name}/{name}", JSON, b"{}", caller)
        status, body, _ = asyncio.run(answer)
        assert status == 200
        assert json.loads(body)["version"] == ("reduced" if name == REDUCED else name)


def _forward_caller(grant: ForwardGrant) -> Caller:
    app = AppId(AppKind.FORWARD, grant.name)
    return Caller(
        OWNER, OWNER, 77, "/usr/bin/ssh", 1, sandbox=app, forward=ForwardConnection(grant)
    )


def test_a_forward_gets_its_own_grant_and_its_policy_stays_fixed(tmp_path: Path) -> None:
    """That it reads and manages nothing is the access table's: tests/unit/test_access_table.py."""
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ALLOW, ask_timeout=30)
    grant = ForwardGrant("box", frozenset({"user:1"}), frozenset({"read"}), "https://api/")
    caller = _forward_caller(grant)
    assert caller.app == "forward:box"

    async def scenario() -> None:
        entitlement = await gate.admit_app(caller)
        assert entitlement.accounts == {"user:1"} and entitlement.scopes == {"read"}
        assert entitlement.audience == "https://api/" and not entitlement.id_token
        with pytest.raises(FixedAtOpening):
            await gate.decide("forward:box", Decision.ALLOW)

    asyncio.run(scenario())


def test_with_confirm_each_connection_asks_once_and_closing_refuses_the_waiting(
    tmp_path: Path,
) -> None:
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ALLOW, ask_timeout=30)
    grant = ForwardGrant("ask", None, confirm=True)
    first, second = _forward_caller(grant), _forward_caller(grant)

    async def scenario() -> None:
        waiting = asyncio.create_task(gate.admit_app(first))
        await asyncio.sleep(0.01)
        gate.answer_once("forward:ask", Decision.ALLOW)
        await waiting
        await gate.admit_app(first)  # the same connection is not asked again
        again = asyncio.create_task(gate.admit_app(second))
        await asyncio.sleep(0.01)
        gate.forward_closed("forward:ask")
        with pytest.raises(AppDenied, match="refused"):
            await again

    asyncio.run(scenario())


def test_a_forward_socket_of_the_persons_choosing_goes_only_where_it_is_safe(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    bound = ForwardSocket(mine / "f.sock", own_folder=False)
    assert (mine / "f.sock").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ForwardSocketError, match="exists"):
        ForwardSocket(mine / "f.sock", own_folder=False)
    bound.listening.close()
    bound.remove()
    assert not (mine / "f.sock").exists()

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(mine)
    (mine / "file").write_text("")
    for path, said in [
        (Path("relative.sock"), "absolute"),
        (shared / "f.sock", "written by other users"),
        (link / "f.sock", "symlink"),
        (mine / "file", "exists"),
        (tmp_path / "absent" / "f.sock", "does not exist"),
    ]:
        with pytest.raises(ForwardSocketError, match=said):
            ForwardSocket(path, own_folder=False)


def test_a_removed_socket_is_only_ever_the_one_bound(tmp_path: Path) -> None:
    folder = tmp_path / "forwards"
    bound = ForwardSocket(folder / "f.sock", own_folder=True)
    assert folder.stat().st_mode & 0o777 == 0o700
    bound.listening.close()
    (folder / "f.sock").unlink()
    (folder / "f.sock").write_text("someone else's")
    bound.remove()
    assert (folder / "f.sock").read_text() == "someone else's"
