"""What the terminal UI knows: the broker's answers and the person's pending choices.

The app fills it from the daemon (GetStatus, ListAccounts, ListApps, WatchEvents) and
from key presses; `screen` draws it. Nothing here does I/O, so it is tested as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..client import Account, App, Event, EventKind, SignInStart, Status


class Tone(Enum):
    """How a message reads: news, good news, or a refusal."""

    INFO = "info"
    GOOD = "good"
    BAD = "bad"


@dataclass(frozen=True, slots=True)
class Question:
    """A yes/no question before something that cannot be undone (sign out, remove)."""

    text: str
    action: str  # "sign_out" or "remove"
    account: str


@dataclass
class SignInView:
    """A sign-in begun from this screen, until its outcome arrives."""

    start: SignInStart
    began_at: float
    progress: str = ""  # the daemon's latest word on it (a slower interval, ...)
    failure: str = ""  # the provider's refusal, as it came
    hidden: bool = False  # the person went back to the accounts; it still runs


@dataclass
class Board:
    """Everything the screen shows."""

    socket_path: str
    status: Status | None = None
    accounts: list[Account] = field(default_factory=list)
    apps: list[App] = field(default_factory=list)
    unreachable: str = ""  # why the daemon cannot be reached; "" while it answers
    selected: int = 0
    sign_in: SignInView | None = None
    question: Question | None = None
    message: str = ""
    tone: Tone = Tone.INFO
    asked: int = 0  # views asked of the daemon so far
    shown: int = 0  # the latest asked view that is on the board

    def say(self, message: str, tone: Tone = Tone.INFO) -> None:
        """The line under the board: what just happened."""
        self.message, self.tone = message, tone

    def ask(self) -> int:
        """A ticket for a view about to be asked of the daemon (see `connected`)."""
        self.asked += 1
        return self.asked

    def connected(
        self, ticket: int, status: Status, accounts: list[Account], apps: list[App]
    ) -> None:
        """The daemon answered: take its view, unless a view asked later is already shown.

        Views are asked concurrently (the 1 s tick, an event, an action's own reload), so
        one asked before an action can arrive after it; taken, it would show an answered
        app as waiting again, and a key pressed at it would answer nothing.
        """
        if ticket < self.shown:
            return
        self.shown = ticket
        self.status, self.accounts, self.apps, self.unreachable = status, accounts, apps, ""
        self.selected = min(self.selected, max(0, len(accounts) - 1))

    def lost(self, reason: str) -> None:
        """The daemon does not answer: say so until it does again."""
        self.unreachable = reason

    @property
    def account(self) -> Account | None:
        """The account the arrow keys have selected."""
        return self.accounts[self.selected] if self.accounts else None

    def move(self, step: int) -> None:
        """Select the next (1) or previous (-1) account."""
        if self.accounts:
            self.selected = (self.selected + step) % len(self.accounts)

    @property
    def showing_sign_in(self) -> SignInView | None:
        """The sign-in on screen, unless the person went back to the accounts."""
        return self.sign_in if self.sign_in is not None and not self.sign_in.hidden else None

    def back(self) -> None:
        """Esc: drop a question, else leave the sign-in screen (a waiting one keeps running)."""
        if self.question is not None:
            self.question = None
        elif self.sign_in is not None and (self.sign_in.failure or self.sign_in.hidden):
            self.sign_in = None
        elif self.sign_in is not None:
            self.sign_in.hidden = True
            self.say("The sign-in still waits for approval; press s to see its code again.")

    @property
    def waiting(self) -> list[App]:
        """Apps whose token request waits for the person's answer, oldest first."""
        return [app for app in self.apps if app.waiting]

    def began(self, start: SignInStart, now: float) -> None:
        """A sign-in started from this screen."""
        self.sign_in = SignInView(start, now)
        self.say("")

    def heard(self, event: Event) -> None:
        """An event from the daemon: the outcome of our sign-in, or news worth a line."""
        mine = self.sign_in is not None and event.sign_in_id == self.sign_in.start.sign_in_id
        if event.kind is EventKind.SIGNED_IN and mine:
            self.sign_in = None
            self.say(f"{event.account}: {event.detail}", Tone.GOOD)
        elif event.kind is EventKind.SIGN_IN_FAILED and mine and self.sign_in is not None:
            self.sign_in.failure = event.detail or "the provider refused the sign-in"
            if self.sign_in.hidden:
                self.sign_in = None
                self.say(f"Sign-in failed: {event.detail}", Tone.BAD)
        elif event.kind is EventKind.SIGN_IN_PROGRESS and mine and self.sign_in is not None:
            self.sign_in.progress = event.detail
        elif event.kind is EventKind.SIGN_IN_PROGRESS and event.account:  # an app's step-up
            self.say(f"{event.account}: {event.detail}", Tone.BAD)
        elif event.kind is EventKind.REVOKED:
            self.say(
                f"{event.account}: {event.detail or 'the provider ended the session'}", Tone.BAD
            )
        elif event.kind is EventKind.SIGNED_OUT and event.account:
            self.say(f"{event.account}: {event.detail or 'signed out'}")
        elif event.kind in (EventKind.DEGRADED, EventKind.RECOVERED):
            self.say(event.detail, Tone.BAD if event.kind is EventKind.DEGRADED else Tone.INFO)
