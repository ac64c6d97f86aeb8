"""Desktop notifications through `notify-send`, where the desktop has one.

A notification is a courtesy: none is shown where notify-send is missing, and one that
fails is logged and forgotten. The helper is spawned by subprocess from a worker
thread, not by the event loop: the loop's spawn forks, and a child forked from a
process running other threads can crash before it reaches exec (seen: SIGSEGV);
subprocess uses vfork, which runs no fork handlers.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess

log = logging.getLogger(__name__)

_background: set[asyncio.Task[None]] = set()  # keeps notification tasks alive until done


def notify(summary: str, body: str) -> None:
    """Show a notification in the background (nothing where notify-send is missing)."""
    notify_send = shutil.which("notify-send")
    if notify_send is None:
        return
    command = (notify_send, "--app-name=signin-broker", summary, body)
    task = asyncio.get_running_loop().create_task(_run_quietly(*command))
    _background.add(task)
    task.add_done_callback(_background.discard)


async def _run_quietly(*command: str) -> None:
    """Run the helper and log a failure."""
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        log.warning("the desktop notification failed", extra={"reason": str(error)})
        return
    if done.returncode != 0:
        log.warning("the desktop notification failed", extra={"exit_status": done.returncode})
