"""Freed memory is given back once after a burst of ended connections, not during it."""

from __future__ import annotations

import asyncio

from signin_broker.daemon.host.memory import FreedMemory


def test_memory_is_given_back_once_after_a_burst_and_not_while_it_goes_on() -> None:
    async def scenario() -> tuple[list[str], int]:
        loop = asyncio.get_running_loop()
        happened: list[str] = []
        done = loop.create_future()

        def give_back() -> None:
            happened.append("given back")
            done.set_result(None)

        freed = FreedMemory(after=10, delay=0.3, give_back=give_back)
        for _ in range(40):  # a burst, over turns of the loop
            freed.ended()
            happened.append("ended")
            await asyncio.sleep(0)
        await asyncio.wait_for(done, 10)
        for _ in range(10):  # nothing more comes of it
            await asyncio.sleep(0)
        return happened, happened.index("given back")

    happened, given_at = asyncio.run(scenario())
    assert happened.count("given back") == 1
    assert given_at == 40  # after the burst's last connection, never during it


def test_a_few_ended_connections_give_nothing_back() -> None:
    async def scenario() -> list[None]:
        given: list[None] = []
        freed = FreedMemory(after=10, delay=0.01, give_back=lambda: given.append(None))
        freed.ended(9)
        await asyncio.sleep(0.1)
        return given

    assert asyncio.run(scenario()) == []
