"""The terminal UI's event loop: the daemon's events and the person's keys, on one board.

One asyncio loop runs the prompt_toolkit application and the broker client. The
board is reloaded on every event of WatchEvents (accounts, apps, the outcome of a
sign-in) and every second (token countdowns, apps waiting for an answer); when the
daemon is away the screen says how to start it and connects again by itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from prompt_toolkit.application import Application
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.styles import Style

from ..client import AppDecision, AsyncBrokerClient, BrokerError
from .board import Board, Question, Tone
from .screen import STYLES, app_name, draw

TICK_SECONDS = 1.0  # countdowns and waiting apps
RETRY_SECONDS = 2.0  # a daemon that is away is asked again this often


class Tui:
    """The board, the broker client and the prompt_toolkit application around them."""

    def __init__(self, broker: AsyncBrokerClient, *, workspace: str = "") -> None:
        self.broker = broker
        self.board = Board(str(broker.socket_path))
        self.workspace = workspace
        self.app: Application[int] = Application(
            layout=Layout(Window(FormattedTextControl(self._screen), wrap_lines=False)),
            key_bindings=self._keys(),
            style=Style.from_dict(STYLES),
            full_screen=True,
            mouse_support=False,
        )

    async def run(self) -> int:
        """Show the board until the person quits."""
        tasks = [asyncio.create_task(self._follow()), asyncio.create_task(self._tick())]
        try:
            return await self.app.run_async()
        finally:
            for task in tasks:
                task.cancel()

    def _screen(self) -> StyleAndTextTuples:
        size = self.app.output.get_size()
        lines = draw(self.board, size.columns, size.rows)
        out: StyleAndTextTuples = []
        for number, line in enumerate(lines):
            out += line
            if number < len(lines) - 1:
                out.append(("", "\n"))
        return out

    # -- the daemon's side ------------------------------------------------------------

    async def _reload(self) -> None:
        ticket = self.board.ask()
        status, accounts, apps = await asyncio.gather(
            self.broker.status(), self.broker.accounts(), self.broker.apps()
        )
        self.board.connected(ticket, status, list(accounts), list(apps.apps))

    async def _follow(self) -> None:
        """Watch the daemon's events for as long as the screen is up, reconnecting."""
        while True:
            try:
                async for event in self.broker.watch_events():
                    self.board.heard(event)
                    await self._reload()
                    self.app.invalidate()
            except BrokerError as error:
                self.board.lost(error.message)
                self.app.invalidate()
            await asyncio.sleep(RETRY_SECONDS)

    async def _tick(self) -> None:
        while True:
            if not self.board.unreachable:
                try:
                    await self._reload()
                except BrokerError as error:
                    self.board.lost(error.message)
            self.app.invalidate()
            await asyncio.sleep(TICK_SECONDS)

    def _do(self, work: Callable[[], Awaitable[str]]) -> None:
        """Run an action in the background; its result or refusal becomes the message line."""

        async def run() -> None:
            try:
                said = await work()
                await self._reload()  # first: the message never stands beside a stale board
                if said:
                    self.board.say(said, Tone.GOOD)
            except BrokerError as error:
                self.board.say(error.message, Tone.BAD)
            self.app.invalidate()

        self.app.create_background_task(run())

    # -- the person's side ------------------------------------------------------------

    def _keys(self) -> KeyBindings:
        """What each key does: (its keys, what it does), the escape key's at once."""
        board = self.board
        bindings: list[tuple[tuple[str, ...], Callable[[], object]]] = [
            (("up", "k"), lambda: board.move(-1)),
            (("down", "j"), lambda: board.move(1)),
            (("s",), lambda: self._begin(device=True)),  # sign in with a code
            (("b",), lambda: self._begin(device=False)),  # sign in in a browser
            (("d",), self._make_default),
            (("o",), lambda: self._ask("sign_out", "Sign out {}?")),
            (("x",), lambda: self._ask("remove", "Remove {} and forget its tokens?")),
            (("y",), self._yes),
            (("a",), self._allow_always),
            (("n",), self._no),
        ]
        keys = KeyBindings()
        for names, action in bindings:
            for name in names:
                keys.add(name)(_on_key(action))
        for name in ("q", "c-c"):
            keys.add(name)(_quit)
        keys.add("escape", eager=True)(_on_key(board.back))
        return keys

    def _allow_always(self) -> None:
        if self.board.question is None:
            self._answer_app("always")

    def _make_default(self) -> None:
        account = self.board.account
        if account is not None and self.board.showing_sign_in is None:
            self._do(lambda: self._default(account.id))

    def _yes(self) -> None:
        if self.board.question is not None:
            self._answer_question()
        else:
            self._answer_app("once")

    def _no(self) -> None:
        if self.board.question is not None:
            self.board.question = None
            self.board.say("Nothing changed.")
        else:
            self._answer_app("deny")

    def _begin(self, *, device: bool) -> None:
        if self.board.sign_in is not None:  # one at a time: show the one that waits
            self.board.sign_in.hidden = False
            return
        if self.board.unreachable:
            return

        async def begin() -> str:
            start = await self.broker.begin_sign_in(device=device, workspace_id=self.workspace)
            self.board.began(start, time.time())
            return ""

        self._do(begin)

    async def _default(self, account: str) -> str:
        await self.broker.set_default_account(account)
        return f"{account} is now the default account."

    def _ask(self, action: str, text: str) -> None:
        account = self.board.account
        if account is not None and self.board.showing_sign_in is None:
            self.board.question = Question(text.format(account.id), action, account.id)

    def _answer_question(self) -> None:
        question, self.board.question = self.board.question, None
        if question is None:
            return
        account = question.account

        async def act() -> str:
            if question.action == "remove":
                await self.broker.remove_account(account)
                return f"{account} was removed."
            result = await self.broker.sign_out(account)
            if result.revocation_error:
                return f"{account} signed out here; the provider said: {result.revocation_error}"
            return f"{account} signed out."

        self._do(act)

    def _answer_app(self, answer: str) -> None:
        waiting = self.board.waiting
        if not waiting or self.board.showing_sign_in is not None:
            return
        app, name = waiting[0].id, app_name(waiting[0])
        decision = AppDecision.DENY if answer == "deny" else AppDecision.ALLOW

        async def decide() -> str:
            _, answered = await self.broker.set_app_policy(app, decision, once=answer == "once")
            said = {"once": "allowed this once", "always": "allowed", "deny": "denied"}[answer]
            return f"{name}: {said} ({answered} waiting request{'s' * (answered != 1)} answered)"

        self._do(decide)


def run(socket_path: str | None, *, workspace: str = "") -> int:
    """`signin-broker tui`: the screen until the person quits (exit status 0)."""

    async def main() -> int:
        async with AsyncBrokerClient(socket_path, timeout=10) as broker:  # on this loop
            return await Tui(broker, workspace=workspace).run()

    return asyncio.run(main())


def _on_key(action: Callable[[], object]) -> Callable[[KeyPressEvent], None]:
    """A key's handler that does `action`, whatever the key press was."""

    def handle(event: KeyPressEvent) -> None:
        action()

    return handle


def _quit(event: KeyPressEvent) -> None:
    event.app.exit(result=0)
