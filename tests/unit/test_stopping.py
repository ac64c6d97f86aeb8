"""What a stuck stop reports: each waiting task and the chain of awaits it hangs in."""

from __future__ import annotations

import asyncio

from signin_broker.daemon.stopping import waiting_tasks


async def _inner(never: asyncio.Event) -> None:
    await never.wait()


async def _outer(never: asyncio.Event) -> None:
    await _inner(never)


def test_a_waiting_task_is_named_with_every_await_it_hangs_in() -> None:
    async def scene() -> list[str]:
        never = asyncio.Event()
        task = asyncio.get_running_loop().create_task(_outer(never), name="stuck-one")
        await asyncio.sleep(0)  # let it reach its await
        try:
            return waiting_tasks()
        finally:
            task.cancel()

    (line,) = asyncio.run(scene())
    name, chain = line.split(": ", 1)
    hops = chain.split(" > ")
    assert name == "stuck-one"
    assert hops[0].startswith("_outer (test_stopping.py:")
    assert hops[1].startswith("_inner (test_stopping.py:")
    assert hops[2].startswith("Event.wait (locks.py:")
    assert len(hops) == 4  # and the event's future, which is no coroutine


def test_the_task_asking_is_not_listed() -> None:
    async def scene() -> list[str]:
        return waiting_tasks()

    assert asyncio.run(scene()) == []
