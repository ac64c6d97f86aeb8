"""The TUI's board and screen without a terminal: every screen fits, nothing needed is cut."""

from __future__ import annotations

import pytest

from signin_broker.client import Account, Event, EventKind, SignInStart, SignInState
from signin_broker.tui.board import Board, Tone
from signin_broker.tui.screen import as_text, draw

NOW = 1_800_000_000.0
LONG_URI = "https://login.example-identity-provider.com/realms/engineering/device"


def device(uri: str = "http://127.0.0.1:4000/device") -> SignInStart:
    return SignInStart(
        sign_in_id="s1",
        url=f"{uri}?user_code=ABCD-EFGH",
        expires_at_unix=int(NOW) + 600,
        device=True,
        verification_uri=uri,
        user_code="ABCD-EFGH",
        interval_seconds=5,
    )


def account(expires_in: float) -> Account:
    return Account(
        "user:1001", "1001", "", "Alice Example", "alice@example.com", True,
        int(NOW + expires_in), int(NOW + expires_in * 0.75),
    )  # fmt: skip


def board_with(**changes: object) -> Board:
    board = Board("/run/user/1000/signin-broker/broker.sock")
    for name, value in changes.items():
        setattr(board, name, value)
    return board


def event(kind: EventKind, detail: str = "", sign_in_id: str = "s1") -> Event:
    return Event(kind, "user:1001", 0, SignInState.SIGNED_IN, detail, sign_in_id)


SCREENS = {
    "nobody": board_with(),
    "signed in": board_with(accounts=[account(52)]),
    "unreachable": board_with(unreachable="the signin-broker daemon is not running"),
}


@pytest.mark.parametrize("size", [(80, 24), (100, 40), (60, 20)], ids=str)
@pytest.mark.parametrize("name", [*SCREENS, "device", "device, long address", "failed"])
def test_every_screen_fills_the_terminal_exactly_and_no_line_is_wider(
    name: str, size: tuple[int, int]
) -> None:
    board = SCREENS.get(name) or board_with()
    if name.startswith("device"):
        board.began(device(LONG_URI if "long" in name else "http://127.0.0.1:4000/device"), NOW)
    if name == "failed":
        board.began(device(), NOW)
        board.heard(event(EventKind.SIGN_IN_FAILED, "access_denied: " + "not a member " * 12))
    width, height = size
    lines = draw(board, width, height, now=NOW)
    assert len(lines) == height
    assert all(sum(len(text) for _, text in line) <= width for line in lines)


def test_the_qr_code_goes_beside_the_steps_when_it_fits_and_the_address_is_never_cut() -> None:
    board = board_with()
    board.began(device(), NOW)
    assert "█" in as_text(draw(board, 80, 24, now=NOW))
    board.began(device(LONG_URI), NOW)  # a longer address makes a bigger QR code
    assert "█" not in as_text(draw(board, 80, 24, now=NOW))
    wide = as_text(draw(board, 100, 40, now=NOW))
    assert "█" in wide and f"Open {LONG_URI}" in wide and "ABCD-EFGH" in wide
    small = as_text(draw(board, 60, 20, now=NOW))  # no room for it: the steps alone
    assert "█" not in small and "ABCD-EFGH" in small
    assert LONG_URI in "".join(small.split())  # split over lines, not cut
    assert "Checking every 5 s" in small and "expires in 10:00" in small


def test_the_providers_refusal_is_shown_in_full_and_esc_then_clears_it() -> None:
    board = board_with()
    board.began(device(), NOW)
    refusal = "access_denied: you are not a member of workspace 7; ask an administrator"
    board.heard(event(EventKind.SIGN_IN_FAILED, refusal))
    shown = " ".join(as_text(draw(board, 50, 24, now=NOW)).split())
    assert refusal in shown  # wrapped at 50 columns, every word there
    board.back()
    assert board.sign_in is None


def test_esc_leaves_a_waiting_sign_in_running_and_its_outcome_still_arrives() -> None:
    board = board_with(accounts=[])
    board.began(device(), NOW)
    board.back()
    home = as_text(draw(board, 80, 24, now=NOW))
    assert "A sign-in waits for approval; press s to see its code." in home
    board.heard(event(EventKind.SIGNED_IN, "signed in as Alice Example"))
    assert board.sign_in is None
    assert (board.message, board.tone) == ("user:1001: signed in as Alice Example", Tone.GOOD)


def test_another_sign_ins_outcome_is_not_taken_for_ours() -> None:
    board = board_with()
    board.began(device(), NOW)
    board.heard(event(EventKind.SIGNED_IN, "signed in as Bob", sign_in_id="someone-elses"))
    assert board.sign_in is not None and board.message == ""


def test_an_apps_step_up_waiting_for_the_person_is_told() -> None:
    board = board_with()
    needs = "git needs a stronger sign-in of Alice (acr urn:rig:mfa): sign in at http://x"
    board.heard(event(EventKind.SIGN_IN_PROGRESS, needs, sign_in_id="step-up"))
    assert (board.message, board.tone) == (f"user:1001: {needs}", Tone.BAD)


def test_token_time_left_and_an_expired_token_read_as_such() -> None:
    shown = as_text(draw(board_with(accounts=[account(52)]), 80, 24, now=NOW))
    assert "> user:1001  Alice Example (default)  signed in, token 52 s left" in shown
    expired = as_text(draw(board_with(accounts=[account(-5)]), 80, 24, now=NOW))
    assert "token expired" in expired and "signed in, token" not in expired


def test_a_view_asked_before_an_answer_never_replaces_one_asked_after_it() -> None:
    # The 1 s tick asks while the person answers an app; its view (the app still
    # waiting) arrives after the one the answer's own reload asked for.
    from signin_broker.client import AppList, Status
    from signin_broker.v1 import broker_pb2 as pb

    status = Status.from_proto(pb.GetStatusResponse())
    waiting = AppList.from_proto(
        pb.ListAppsResponse(apps=[pb.App(id="exe:/usr/bin/mail", waiting=True)])
    ).apps
    board = board_with()
    tick, after_the_answer = board.ask(), board.ask()
    board.connected(after_the_answer, status, [account(52)], [])
    board.connected(tick, status, [], list(waiting))
    assert board.waiting == [] and [a.id for a in board.accounts] == ["user:1001"]
    later = board.ask()
    board.connected(later, status, [], list(waiting))
    assert [a.id for a in board.waiting] == ["exe:/usr/bin/mail"]
