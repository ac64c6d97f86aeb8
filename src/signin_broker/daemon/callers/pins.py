"""SHA-256 pins of apps: the hash of the program a caller really runs, or a refusal.

A native program is hashed through /proc/<pid>/exe, which opens the very file the
kernel is running, even if the path now names another file. A script is hashed at
the absolute path its command line names, which names the same file for the daemon
(identity.py refuses a script's caller of another mount namespace or root); a script
named by a relative path (which
depends on a cwd the process may have changed since) or run as `-m module` cannot
be pinned. Only regular files are read (never a FIFO or a device), at most
MAX_PROGRAM_BYTES, in a worker thread so a slow disk never stalls the daemon; a hash
is remembered while the file's device, inode, size, mtime and ctime stay the same
(a same-size edit with its mtime put back still changes the ctime).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat

from .identity import Caller

MAX_PROGRAM_BYTES = 1 << 30
_CACHE_SIZE = 128
_cache: dict[tuple[int, int, int, int, int], str] = {}


class Unpinnable(Exception):
    """The program cannot be hashed soundly; the message says why and what to do."""


def pinned_program(caller: Caller) -> str:
    """The path the pin of this caller covers (for messages), or raise Unpinnable."""
    if caller.sandbox is not None:
        raise Unpinnable(f"{caller.sandbox} is identified by its sandbox; it has no pin")
    if caller.script:
        if caller.script.startswith("-m"):
            raise Unpinnable(f"a module run with {caller.script!r} cannot be pinned")
        if not caller.script_is_absolute:
            raise Unpinnable(
                f"{caller.script} was started by a relative path (or one through '..'),"
                " which cannot be pinned; run it by its absolute path"
            )
        return caller.script
    if not caller.executable:
        raise Unpinnable("the calling program could not be identified")
    return caller.executable


async def running_sha256(caller: Caller) -> str:
    """The SHA-256 of what the caller runs (see pinned_program); raises Unpinnable."""
    program = pinned_program(caller)
    path = program if caller.script else f"/proc/{caller.pid}/exe"
    return await asyncio.to_thread(file_sha256, path)


def file_sha256(path: str) -> str:
    """The SHA-256 of a regular file (following links), or raise Unpinnable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as error:
        raise Unpinnable(f"{path} cannot be read: {error.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unpinnable(f"{path} is not a regular file")
        if info.st_size > MAX_PROGRAM_BYTES:
            raise Unpinnable(f"{path} is larger than {MAX_PROGRAM_BYTES} bytes")
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        known = _cache.get(key)
        if known is None:
            known = _hash(fd)
            if len(_cache) >= _CACHE_SIZE:
                _cache.pop(next(iter(_cache)))
            _cache[key] = known
        return known
    finally:
        os.close(fd)


def _hash(fd: int) -> str:
    digest = hashlib.sha256()
    read = 0
    while block := os.read(fd, 1 << 20):
        read += len(block)
        if read > MAX_PROGRAM_BYTES:
            raise Unpinnable("the program grew past the size limit while it was read")
        digest.update(block)
    return digest.hexdigest()
