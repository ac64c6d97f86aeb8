"""A background program with no terminal and no display: a sync agent run by a user unit.

    python -m signin_broker.examples.sync_agent URL [--account ID] [--interval SECONDS]

It never signs anyone in (it has no screen to do it on): it asks the broker for a token
before each call, so renewals are the broker's business, not its own. It watches the
broker's events; when the session ends (the provider revoked it, or the person signed
out) it stops calling and says so once, and when the account is signed in again it
resumes by itself. `examples/sync-agent.service` runs it as a systemd user service.

Each line it prints is a log line for the journal. SIGUSR1 makes it sync now (`systemctl
--user kill -s USR1 sync-agent`); it stops on SIGTERM, or after `--rounds` calls.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import httpx2

from signin_broker import (
    AsyncBrokerClient,
    BrokerError,
    Event,
    EventKind,
    NotSignedIn,
    SignInState,
)

ENDED = (EventKind.REVOKED, EventKind.SIGNED_OUT)
RETRY_SECONDS = 5.0


class Agent:
    """Calls `url` every `interval` seconds with the account's token, while it has a session."""

    def __init__(self, broker: AsyncBrokerClient, url: str, account: str) -> None:
        self.broker, self.url, self.account = broker, url, account
        self.signed_in = asyncio.Event()
        self.signed_in.set()  # until told otherwise: the first call finds out
        self.woken = asyncio.Event()  # sync now: SIGUSR1, or the session is back
        self.stopping = asyncio.Event()  # SIGTERM: end at the next pause
        self.asked = False  # the wake came from a person (SIGUSR1), who wants an answer

    @staticmethod
    def say(line: str) -> None:
        """One journal line."""
        print(f"sync-agent: {line}", flush=True)

    def wake(self, *, asked: bool) -> None:
        """Sync at once instead of at the end of the interval."""
        self.asked = self.asked or asked
        self.woken.set()

    async def follow_the_session(self) -> None:
        """Pause at the session's end and resume at the next sign-in, from the event stream.

        A lost stream (the daemon restarted) is watched again; its first message, the
        snapshot, tells whether a sign-in happened meanwhile.
        """
        while True:
            try:
                async for event in self.broker.watch_events():
                    self._heard(event)
            except BrokerError as error:
                self.say(f"lost the broker's events ({error.message}); watching again")
            await asyncio.sleep(RETRY_SECONDS)

    def _heard(self, event: Event) -> None:
        mine = not self.account or event.account == self.account
        paused = not self.signed_in.is_set()
        if event.kind in ENDED and mine and not paused:
            self.signed_in.clear()
            self.say(f"paused: {event.detail or event.kind.value}; waiting for a sign-in")
        elif event.kind is EventKind.SIGNED_IN and mine:
            self.say(f"sign-in: {event.account} {event.detail}")
            if paused:
                self._resume(event.account)
        elif event.kind is EventKind.SNAPSHOT and paused:
            if event.sign_in_state is SignInState.SIGNED_IN:  # while the stream was lost
                self._resume("the account")
        elif event.kind is EventKind.SIGN_IN_FAILED:
            self.say(f"a sign-in failed: {event.detail}" + ("; still waiting" if paused else ""))

    def _resume(self, account: str) -> None:
        self.say(f"resumed: {account} signed in again")
        self.signed_in.set()
        self.wake(asked=False)

    async def sync_once(self, *, asked: bool = False) -> bool:
        """One call with a fresh token; False when there was no session to call with.

        `asked`: a person woke it (SIGUSR1) and is told when it cannot call.
        """
        if not self.signed_in.is_set():
            if asked:
                self.say("not synced: waiting for a sign-in")
            return False
        try:
            token = await self.broker.get_token(self.account, min_ttl_seconds=30)
        except NotSignedIn as error:  # the broker says why the session ended, if it did
            if self.signed_in.is_set():
                self.signed_in.clear()
                self.say(f"paused: {error.message}; waiting for a sign-in")
            return False
        if not self.signed_in.is_set():  # the session ended while the broker answered
            return False
        async with httpx2.AsyncClient(timeout=10) as http:
            answer = await http.get(self.url, headers={"Authorization": token.authorization})
        if answer.status_code == 200:
            user = answer.json()
            self.say(f"synced as {user.get('name') or token.account} (sub {user.get('sub')})")
        else:
            self.say(f"the server answered HTTP {answer.status_code}; trying again later")
        return True

    async def sync_forever(self, interval: float, rounds: int | None) -> int:
        """Sync every interval (or when woken) until stopped; 1 when the broker refuses the app."""
        calls = 0
        try:
            while not self.stopping.is_set() and (rounds is None or calls < rounds):
                asked, self.asked = self.asked, False  # a wake during the call is kept
                calls += await self.sync_once(asked=asked)
                await self._pause(interval)
        except BrokerError as error:  # e.g. the app is denied: `signin-broker apps` says why
            self.say(f"the broker refused: {error.message}")
            return 1
        return 0

    async def _pause(self, interval: float) -> None:
        """Until the interval ends, a wake, or a stop.

        Not a task.cancel() from the signal handler: asyncio.wait_for on Python 3.11 can
        swallow a cancellation that lands as its wait ends, and the agent then kept going.
        """
        waits = [
            asyncio.ensure_future(self.woken.wait()),
            asyncio.ensure_future(self.stopping.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        self.woken.clear()


async def run(url: str, account: str, interval: float, rounds: int | None) -> int:
    """The agent until SIGTERM (or its rounds); its exit status."""
    async with AsyncBrokerClient() as broker:
        agent = Agent(broker, url, account)
        following = asyncio.create_task(agent.follow_the_session())
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):  # stops it even while paused
            loop.add_signal_handler(signum, agent.stopping.set)
        loop.add_signal_handler(signal.SIGUSR1, lambda: agent.wake(asked=True))
        try:
            code = await agent.sync_forever(interval, rounds)
        finally:
            following.cancel()
    agent.say("stopped")
    return code


def main() -> None:
    """The command line of the agent."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("url", help="what to call with the token (e.g. the provider's userinfo)")
    parser.add_argument("--account", default="", help="the account (default: the default one)")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between calls")
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many calls")
    options = parser.parse_args()
    sys.exit(asyncio.run(run(options.url, options.account, options.interval, options.rounds)))


if __name__ == "__main__":
    main()
