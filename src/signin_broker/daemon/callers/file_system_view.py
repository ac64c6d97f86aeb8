"""Paths read in /proc, taken only where they name for the daemon the file the caller runs.

The kernel names a process's executable (/proc/<pid>/exe) by its path in the process's
own mount namespace, and an interpreter's script is the text of its command line, read
against its own root. A process of the same uid can make a mount namespace of its own
(`unshare -Urm`) and put any file at /opt/google/chrome/chrome or /usr/bin/some-app
there, or run such a file from the daemon's namespace through /proc/<pid>/root/...: the
kernel then names a path where the daemon, and the person's rules, find another file or
none. So:

- an executable is the path the kernel names when the file the process runs is the file
  the daemon finds there (the same device and inode); when that file was replaced since
  the process started (an upgrade; the kernel adds " (deleted)"), when it lay on the very
  mount the daemon finds at that path's folder;
- a script, which the daemon cannot open as the interpreter did, when the process sees
  the file system as the daemon does: the same mount namespace and the same root.

Anything else raises NotTheDaemonsFile, with the reason (a /proc file that cannot be
read raises OSError: the caller could not be identified at all).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

DELETED = " (deleted)"


class NotTheDaemonsFile(Exception):
    """A path read in /proc names, for the daemon, another file than the process's (or may)."""

    def __init__(self, what: str, path: str) -> None:
        super().__init__(
            f"its {what} {path} is not known to be the daemon's file at that path: it runs in"
            " a mount namespace or root of its own (an app in a container reaches the broker"
            " through a forward: signin-broker forward)"
        )
        self.path = path


def running_program(pid: int) -> str:
    """The path of the program pid runs, as the daemon finds that file; else NotTheDaemonsFile."""
    named = os.readlink(f"/proc/{pid}/exe")  # noqa: PTH115 - a str, not a Path, is kept
    running = os.stat(f"/proc/{pid}/exe")  # noqa: PTH116 - the very file, whatever the path names
    if _is_there(running, named):
        return named
    path = named.removesuffix(DELETED)
    if path != named and running.st_nlink == 0 and _same_mount(f"/proc/{pid}/exe", path):
        return path  # replaced on disk since it started, in the daemon's own file system
    raise NotTheDaemonsFile("program", path)


def check_same_view(pid: int, script: str) -> None:
    """NotTheDaemonsFile unless pid sees the file system as the daemon does (its script's)."""
    namespace, root = _own_view()
    if not (
        _same_file(os.stat(f"/proc/{pid}/ns/mnt"), namespace)  # noqa: PTH116 - per connection:
        and _same_file(os.stat(f"/proc/{pid}/root"), root)  # noqa: PTH116 - no Path built
    ):
        raise NotTheDaemonsFile("script", script)


@functools.cache
def _own_view() -> tuple[os.stat_result, os.stat_result]:
    """The daemon's own mount namespace and root, which it never leaves."""
    return os.stat("/proc/self/ns/mnt"), os.stat("/")  # noqa: PTH116


def _is_there(running: os.stat_result, path: str) -> bool:
    try:
        return _same_file(running, os.stat(path))  # noqa: PTH116
    except OSError:
        return False


def _same_file(one: os.stat_result, other: os.stat_result) -> bool:
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


def _same_mount(executable: str, path: str) -> bool:
    """Whether the executable lies on the mount the daemon finds at path's folder."""
    mount = _mount_of(executable)
    return mount >= 0 and mount == _mount_of(str(Path(path).parent))


def _mount_of(path: str) -> int:
    """The kernel's id of the mount that holds path (its `mnt_id`); -1 when it cannot tell."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return -1
    try:
        with Path(f"/proc/self/fdinfo/{fd}").open(encoding="ascii") as info:
            for line in info:
                name, _, value = line.partition(":")
                if name == "mnt_id":
                    return int(value)
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)
    return -1
