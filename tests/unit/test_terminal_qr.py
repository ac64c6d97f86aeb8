"""The device sign-in's QR code: colour escapes only where a terminal shows them."""

from __future__ import annotations

import io
import os
import pty

import pytest

from signin_broker.tui.qr import terminal_qr, wants_colour


def test_a_terminal_gets_colour_unless_no_color_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as terminal:
        monkeypatch.delenv("NO_COLOR", raising=False)
        assert wants_colour(terminal)
        monkeypatch.setenv("NO_COLOR", "1")
        assert not wants_colour(terminal)
    os.close(leader)


def test_a_pipe_or_file_gets_no_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert not wants_colour(io.StringIO())


def test_the_plain_code_has_the_same_modules_without_escapes() -> None:
    coloured = terminal_qr("https://example.test/device", colour=True)
    plain = terminal_qr("https://example.test/device", colour=False)
    assert "\x1b[30;47m" in coloured and "\x1b" not in plain
    assert coloured.replace("\x1b[30;47m", "").replace("\x1b[0m", "") == plain
