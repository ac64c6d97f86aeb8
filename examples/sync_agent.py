"""A background program with no terminal and no display: a sync agent run by a user unit.

    python examples/sync_agent.py URL [--account ID] [--interval SECONDS] [--rounds N]

It never signs anyone in (it has no screen to do it on): it asks the broker for a token
before each call, so renewals are the broker's business, not its own. It watches the
broker's events; when the session ends (the provider revoked it, or the person signed
out) it stops calling and says so once, and when the account is signed in again it
resumes by itself. `examples/sync-agent.service` runs it as a systemd user service.

Each line it prints is a log line for the journal. It stops on SIGTERM, or after
`--rounds` calls when given.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import httpx2

from signin_broker import AsyncBrokerClient, BrokerError, EventKind, NotSignedIn

ENDED = (EventKind.REVOKED, EventKind.SIGNED_OUT)


class Agent:
    """Calls `url` every `interval` seconds with the account's token, while it has a session."""

    def __init__(self, broker: AsyncBrokerClient, url: str, account: str) -> None:
        self.broker, self.url, self.account = broker, url, account
        self.signed_in = asyncio.Event()
        self.signed_in.set()  # until told otherwise: the first call finds out

    def say(self, line: str) -> None:
        print(f"sync-agent: {line}", flush=True)

    async def follow_the_session(self) -> None:
        """Pause at the session's end and resume at the next sign-in, from the event stream."""
        async for event in self.broker.watch_events():
            mine = not self.account or event.account == self.account
            if event.kind in ENDED and mine and self.signed_in.is_set():
                self.signed_in.clear()
                self.say(f"paused: {event.detail or event.kind.value}; waiting for a sign-in")
            elif event.kind is EventKind.SIGNED_IN and mine and not self.signed_in.is_set():
                self.say(f"resumed: {event.account} signed in again")
                self.signed_in.set()

    async def sync_once(self) -> None:
        await self.signed_in.wait()
        try:
            token = await self.broker.get_token(self.account, min_ttl_seconds=30)
        except NotSignedIn:
            if self.signed_in.is_set():
                self.signed_in.clear()
                self.say("paused: nobody is signed in; waiting for a sign-in")
            return
        if not self.signed_in.is_set():  # the session ended while the broker answered
            return
        async with httpx2.AsyncClient(timeout=10) as http:
            answer = await http.get(self.url, headers={"Authorization": token.authorization})
        if answer.status_code == 200:
            self.say(f"synced as {answer.json().get('name') or token.account}")
        else:
            self.say(f"the server answered HTTP {answer.status_code}; trying again later")


async def sync_forever(agent: Agent, interval: float, rounds: int | None) -> int:
    done = 0
    try:
        while rounds is None or done < rounds:
            await agent.sync_once()
            done += 1
            await asyncio.sleep(interval)
    except BrokerError as error:  # e.g. the app is denied: `signin-broker apps` says why
        agent.say(f"the broker refused: {error.message}")
        return 1
    return 0


async def run(url: str, account: str, interval: float, rounds: int | None) -> int:
    async with AsyncBrokerClient() as broker:
        agent = Agent(broker, url, account)
        following = asyncio.create_task(agent.follow_the_session())
        syncing = asyncio.create_task(sync_forever(agent, interval, rounds))
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):  # stops it even while paused
            loop.add_signal_handler(signum, syncing.cancel)
        try:
            code = await syncing
        except asyncio.CancelledError:
            code = 0
        finally:
            following.cancel()
    agent.say("stopped")
    return code


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="what to call with the token (e.g. the provider's userinfo)")
    parser.add_argument("--account", default="", help="the account (default: the default one)")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between calls")
    parser.add_argument("--rounds", type=int, default=None, help="stop after this many calls")
    options = parser.parse_args()
    sys.exit(asyncio.run(run(options.url, options.account, options.interval, options.rounds)))
