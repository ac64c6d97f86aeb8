"""How the daemon stops: each stage with a grace, the whole within a limit.

A stop that hangs must not outlive the service manager's patience in silence. The
stages get STAGES_LIMIT_SECONDS together; past it the log names every task still
waiting and where it waits, and the daemon goes on to exit. Past STOP_LIMIT_SECONDS
(a worker thread or native code that never returns) faulthandler writes every
thread's stack to stderr and ends the process with status 1; main cancels that once
the event loop and its worker threads are done.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session.manager import SessionManager
    from .api.transport import CheckedServer, ConnectionTable
    from .web.on_demand import PageOnDemand

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 2.0  # renewals under way, then calls in flight, then the page
STAGES_LIMIT_SECONDS = 8.0  # the three graces and the rest's few milliseconds
STOP_LIMIT_SECONDS = 10.0


async def stop(
    session: SessionManager,
    server: CheckedServer,
    connections: ConnectionTable,
    page: PageOnDemand,
    background: list[asyncio.Task[None]],
) -> None:
    """Wind everything down; `background` is cancelled (the keeper first, then the rest)."""

    async def stages() -> None:
        keeper, *others = background
        keeper.cancel()
        await session.wind_down(SHUTDOWN_GRACE_SECONDS, "the daemon is stopping")
        await asyncio.gather(_stop_server(server, connections), page.stop())
        for task in others:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task  # the audit writer writes what is still queued
        await session.close()

    faulthandler.dump_traceback_later(STOP_LIMIT_SECONDS, exit=True)
    running = asyncio.ensure_future(stages())
    done, _ = await asyncio.wait({running}, timeout=STAGES_LIMIT_SECONDS)
    if not done:
        log.error(
            "the stop is stuck: leaving what still waits",
            extra={"waiting": waiting_tasks(), "limit_s": STAGES_LIMIT_SECONDS},
        )
        return
    running.result()


async def _stop_server(server: CheckedServer, connections: ConnectionTable) -> None:
    """Give calls in flight a moment to finish, then close every connection."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SHUTDOWN_GRACE_SECONDS
    while connections.active_calls() and loop.time() < deadline:  # noqa: ASYNC110 - bounded
        await asyncio.sleep(0.05)
    server.close()
    connections.close_all()
    await server.wait_closed()


def waiting_tasks() -> list[str]:
    """Each other task still running, with the chain of awaits it is suspended in."""
    return [
        f"{task.get_name()}: " + " > ".join(_awaits(task.get_coro()))
        for task in asyncio.all_tasks()
        if task is not asyncio.current_task()
    ]


def _awaits(awaitable: Any, depth: int = 24) -> list[str]:
    """Where a suspended coroutine waits: its frame, then what it awaits, and so on."""
    where: list[str] = []
    while awaitable is not None and len(where) < depth:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "ag_frame", None)
        if frame is None:
            where.append(type(awaitable).__qualname__)
            break
        code = frame.f_code
        where.append(f"{code.co_qualname} ({Path(code.co_filename).name}:{frame.f_lineno})")
        awaitable = getattr(awaitable, "cr_await", None) or getattr(awaitable, "ag_await", None)
    return where


def cancel_limit() -> None:
    """The stop finished in time: no stacks, no exit 1."""
    faulthandler.cancel_dump_traceback_later()
